"""Benchmarks: built-in workloads timed per execution mode (``dualflow bench``, DESIGN §10).

Performance targets live here as reported numbers, never as timed assertions in tests.
"""

"""Optimizer update kernels on host arrays: Adam's step over a parameter and its two moments in
one pass (``adam``)."""

"""PyTorch and JAX versions of the bench workloads, each run in a fresh process (``--peers``).

``child.py``, ``torch_workloads.py`` and ``jax_workloads.py`` run under another interpreter
(``--peers-python``) that may lack dualflow's dependencies: they import only the standard library,
numpy and their framework, never dualflow. ``runner.py`` starts them and reads their one result
line; ``goals.py`` holds the issue's goals and the side-by-side table.
"""

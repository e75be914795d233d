"""CPU pooling kernels on numpy: max/avg pooling and their gradients in one pass per output.

- ``pool_kernels``: the kernels, compiled on first use (machine code in the signed store), run
  over (n, c) planes split across ``base.cpu_threads``; ``covers`` says which arrays they take.
- ``pool_loops``: the numba loop bodies, rounding exactly as ``ops/pooling.py``'s numpy loops.

Imports ``base`` (its ``windows`` too).
"""

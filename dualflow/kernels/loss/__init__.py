"""CPU loss kernels on numpy: softmax cross entropy's forward and gradient in one pass each.

- ``cross_entropy``: the numba row loops (float32 with ``fast_math``'s ``exp_f32``, float64 with
  libm's exp), compiled on first use (machine code in the signed store), rows split across
  ``base.cpu_threads`` for large inputs; ``covers`` says which arrays they take.

Imports ``base`` and ``fast_math``.
"""

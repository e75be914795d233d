"""The expression IR of elementwise ops: one scalar expression drives eager, fusion and kernels.

- ``scalar_table``: every function an expression may call, one row each, with every fact a
  backend needs (ufunc, arity, transcendental, in-place, loop typing, per-backend renderings).
- ``expression``: parsing ``where(x > 0, x, x * slope)`` into nested tuples, checking, and
  rendering/compiling to numpy (or any ``xp``) source.
- ``typed_program``: an expression lowered to typed straight-line steps (numpy's promotion).
- ``out_forwards``: elementwise forwards that write into a caller's ``out=`` buffer.
- ``module_functions``: scalar functions an array module lacks (``erf``), per module.
- ``kernel_work``: a fused kernel's one-thread time per element in copies (its split threshold).

Imports only ``base`` and ``fast_math`` (lazily by the table's rows; ``kernel_work``, which only
the numba kernels import, reads ``fast_math.work_weights``).
"""

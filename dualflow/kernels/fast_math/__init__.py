"""float32 ``tanh`` and ``exp`` as dualflow's own vectorized functions, on every CPU path.

- ``fast_tanh``, ``fast_exp``: the branch-free scalar float32 functions (``tanh_f32``,
  ``exp_f32``) that fused numba kernels inline, and the numpy-meaning calls eager and the blocked
  evaluator run (``numpy_tanh``, ``numpy_exp``), so compiled stays bit-identical to eager.
- ``float32_loops``: a scalar float32 numba function made the float32 loop of a numpy ufunc.

The scalar-function table (``expr.scalar_table``) names these modules in its ``tanh``/``exp`` rows.
"""

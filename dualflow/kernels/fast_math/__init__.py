"""float32 ``tanh`` and ``exp`` as dualflow's own vectorized functions, on every CPU path.

- ``scalars``: the branch-free scalar float32 functions (``tanh_f32``, ``exp_f32``) that fused
  numba kernels inline, and the LLVM operations they are built from.
- ``fast_tanh``, ``fast_exp``: those functions' numpy-meaning calls that eager and the blocked
  evaluator run (``numpy_tanh``, ``numpy_exp``), so compiled stays bit-identical to eager.
- ``work_weights``: each heavy scalar function's one-thread cost per element in copies,
  measured once per machine (the split thresholds of the loops here and of the fused kernels).
- ``float32_loops``: a scalar float32 numba function made the float32 loop of a numpy ufunc.

The scalar-function table (``expr.scalar_table``) names these modules in its ``tanh``/``exp`` rows.
"""

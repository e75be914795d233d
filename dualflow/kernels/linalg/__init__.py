"""Dense linear-algebra kernels: matrix products arranged so BLAS runs them on its fast path.

- ``gemm``: numpy-semantics ``matmul`` that runs a stack of matrices times one matrix as one 2-D
  GEMM over every row (numpy's batched loop calls BLAS once per matrix, at about half the rate
  on the LM steps' shapes), and a few rows times a transposed matrix as the transposed product
  (OpenBLAS's fast shape).
- the recurrences: ``lstm_forward``, ``gru_forward`` and ``recurrence`` (one GEMM a step and a
  numba cell or step kernel, from ``cells``, ``grad_steps`` and ``tiles``), and
  ``lstm_lockstep``, ``gru_lockstep`` (the same split by hidden units over two threads in
  lockstep, ``unit_parts``), whose GEMMs call OpenBLAS from numba (``cblas``).

Imports nothing from the other kernel subpackages but ``base`` and ``fast_math``.
"""

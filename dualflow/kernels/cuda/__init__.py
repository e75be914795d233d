"""Kernels on cupy arrays: importing any of these needs no cupy (it is imported when they run).

- ``cuda_render``: typed expression programs rendered to CUDA C (numpy's promotion).
- ``cuda_elementwise``: eager elementwise ops, one cached ``cupy.ElementwiseKernel`` each.
- ``cuda_fused``: fused nodes as ``ElementwiseKernel``/``ReductionKernel``, and ``xp_runner``
  running a fused expression through any array module's functions.
- ``cudnn``: cuDNN paths of convolution, pooling and batch norm.

The cupy ``Backend`` (``kernels.backend``) runs these; imports ``expr`` and ``base.windows``.
"""

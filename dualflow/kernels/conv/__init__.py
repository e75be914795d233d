"""Convolution kernels: GEMM columns over any array module, numba routes on numpy's arrays.

- ``conv_gemm``: conv2d, its input and weight gradients as one GEMM per chunk of images over
  channels-last columns, and the routing to the kernels below (any array module).
- ``channels_first_columns``: convolutions of few input channels (a network's first layer).
- ``pointwise_conv``: 1x1 convolutions as batched GEMMs on NCHW arrays.
- ``winograd`` (``winograd_loops``: its numba loops): 3x3 stride-1 convolutions, F(4x4, 3x3).
- ``column_copies``, ``layout_copies``: numba copies into GEMM columns and between layouts.
- ``conv_scratch``: what each kernel allocates besides inputs and result (the memory planner's).

Sliding-window sizes and offsets are ``base.windows``. The numba routes run where the array
module's ``Backend`` says they do (``host_kernels``: numpy), so this package sits above
``kernels.backend``; ``ops/conv.py`` calls ``conv_gemm`` and ``conv_scratch``.
"""

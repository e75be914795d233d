"""Kernels: the layer below ``ops`` that computes. Scalar expressions and their renderers (numpy,
numba, CUDA C), the fused and fused-sum kernels (blocked numpy evaluator, numba, cupy), the eager
CUDA elementwise kernels, im2col/col2im and cuDNN calls. It imports no ``dualflow`` layer above
``device``/``_config``/``errors`` and the signed disk stores, so ops, graph_ir and runtime share it.
"""

"""Kernels: the layer below ``ops`` that computes. It imports no ``dualflow`` layer above
``device``/``_config``/``errors`` and the signed disk stores, so ops, graph_ir and runtime share
it. One subpackage per job, each importing only those below it (tests/test_layering.py):

    conv/  fused.py            convolution (GEMM columns, Winograd, 1x1) and one fused node's
      |                        kernel, both choosing through the Backend record
    backend.py                 which kernels run on an array module's arrays (the Backend record)
      |
    cuda/                      cupy: eager elementwise and fused kernels, CUDA C rendering, cuDNN
      |
    fused_cpu/  pool/          numpy: the blocked fused evaluator and its numba-or-blocked choice;
    linalg/  loss/             pooling; matrix products routed to large GEMMs; softmax cross
                               entropy's loss and gradient
      |
    numba/                     generated numba kernels of fused expressions: rendering, loading,
      |                        the background compile worker and its render API
    expr/                      expression IR: parsing, the scalar-function table, typed programs,
      |                        numpy rendering and the ``out=`` forwards
    fast_math/                 float32 tanh/exp as vectorized numba loops (eager and fused)
      |
    base/                      what kernels stand on: worker threads, the signed numba
                               machine-code store, an LRU dict, sliding-window helpers

How to add a scalar function, a kernel or a backend: docs/design-notes.md.
"""

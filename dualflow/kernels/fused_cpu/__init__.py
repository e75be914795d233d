"""``fused`` nodes on numpy arrays: the blocked numpy evaluator and the numba-or-blocked choice.

- ``fused_elementwise``: the blocked evaluator (eager's own ufuncs chunk by chunk into reused
  temporaries, bit-identical to eager), the choice of numba (``numba``) for arithmetic-only
  programs, the kernel cache and the evaluator's scratch bytes; also eager's one-pass kernels
  of big selection/comparison calls.
- ``fused_sum``: fused nodes ending in a full ``sum``: elements added as they are made.
- ``blocked_invariants``: steps with one value per call, computed once as eager computes them.

The numpy ``Backend`` (``kernels.backend``) runs these.
"""

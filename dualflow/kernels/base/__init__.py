"""What every kernel stands on, imported by the other kernels subpackages and importing none.

- ``cpu_threads``: one kernel call's parts run at once on ``dualflow.background``'s worker threads.
- ``numba_cache``: numba's machine code of dualflow's kernels kept signed in the kernels store
  (numba never opens a cache file itself).
- ``lru_dict``: a dict keeping only its most recently used entries (the fused kernel cache).
- ``windows``: output sizes, tap offsets and padding of sliding windows, over any ``xp``
  (convolution, pooling, cuDNN, and the ops' argument checks).
"""

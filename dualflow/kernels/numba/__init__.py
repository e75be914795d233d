"""Generated numba kernels of fused elementwise expressions and sums: build, cache, worker.

- ``numba_elementwise``: a typed program rendered to Python source and compiled by numba (flat or
  broadcast loop nests: ``broadcast_nest``; ``flat_view``: a 1-D view intrinsic;
  ``small_call_runner``: the straight-line Python runner of small calls).
- ``native_split``: a flat kernel's ``entry`` and ``split``, which run its rows on the native
  crew's threads (``kernels.base.native_crew``), and when a call splits there.
- ``numba_sum``: fused sums, each element added into float64 (or integer) lanes as it is made.
- ``kernel_requests``: the render API: a compile request's kernel rendered and built, and a sum's
  loop layout. ``compile_worker`` (the worker process, and how a caller talks to it) depends on
  it alone; ``background_compile`` asks the worker and stands the blocked evaluator in meanwhile.

Imports ``expr`` and ``base``; ``fused_cpu`` chooses between these kernels and its evaluator.
"""

"""``@dualflow.compile``: concrete tracing with guards, transactional fallback and a trace cache.

See DESIGN §3: the function runs once for real under a tracing interpreter that also records a
graph; later calls run the graph's plan while the signature, captured state and guards hold.
"""

from dualflow.tracer.compile_settings import disable_compile
from dualflow.tracer.compiled import CompiledFunction, Trace, compile
from dualflow.tracer.dynamic_dims import mark_dynamic, mark_static
from dualflow.tracer.explain import Explanation, explain

__all__ = [
    "CompiledFunction",
    "Explanation",
    "Trace",
    "compile",
    "disable_compile",
    "explain",
    "mark_dynamic",
    "mark_static",
]

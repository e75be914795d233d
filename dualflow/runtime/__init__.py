"""The runtime: lower a graph to a Plan (a straight-line executor) and run it (DESIGN §6).

Imports only ``graph_ir``, ``ops`` and ``device``: plans run without the eager machinery.
"""

from dualflow.runtime.plan import Plan, RunResult, lower

__all__ = ["Plan", "RunResult", "lower"]

"""The source line a traced op is recorded with: the user's line, or its forward op's line.

Kept apart from the interpreter so every recorder (ops, casts, assigns) names lines alike.
"""

from __future__ import annotations

import os
from typing import Any

from dualflow.errors import user_frame


def op_line(tracer: Any) -> str | None:
    """The user's line of the op being recorded; for an op of a backward, the forward op's
    line (``sqrt (backward) at train.py:27``), as eager debug mode reports gradients."""
    node = tracer.differentiating
    if node is not None:
        origin = tracer.forward_loc(node)
        if origin is not None:
            return f"{node.op.name} (backward) at {origin}"
    frame = user_frame(3)
    if frame is None:
        return None
    tracer.files.add(frame[0])  # user source the graph depends on (plan-cache validity)
    return f"{os.path.basename(frame[0])}:{frame[1]}"

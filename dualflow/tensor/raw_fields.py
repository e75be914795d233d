"""While a trace runs, code outside dualflow that touches a Tensor's raw fields tells the trace.

``raw_array`` and ``raw_grad`` are the machinery's fields (``Tensor``'s docstring), and a tape
node's ``saved_inputs``/``saved_outputs`` hold arrays the same way: plain slots,
read on every eager op, so they cost nothing and tell nobody. Code outside the package that
reads them inside a compiled function would bake the traced call's values, or its sizes behind
the symbolic ones' back, into the graph: ``float(x.raw_array.sum())`` returned the first call's
sum at every call. So while a trace runs (``watching()``, entered by the tracer around the
traced function), those slots are replaced on their classes by properties that look at their
caller: dualflow's own modules and generated code go straight to the slot; anything else is
what the user-facing ``array``/``grad`` properties are, a read the trace must see, and the
trace fails closed (the call runs by lazy re-execution, with the right values).

The swap is process-wide but the properties ask ``tracing()``, which only the tracing thread
sees: other threads pay a property call while a trace runs, nothing else.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dualflow.ops.dispatch import tracing
from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import Node

FIELDS = ((Tensor, "raw_array"), (Tensor, "raw_grad"))
FIELDS += ((Node, "saved_inputs"), (Node, "saved_outputs"))
_SLOTS = {(owner, name): owner.__dict__[name] for owner, name in FIELDS}
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_lock = threading.Lock()
_depth = [0]  # traces running now (nested or on other threads): the swap stays while any does


def _inside(filename: str) -> bool:
    """Whether code from ``filename`` is dualflow's own (a module, or generated code)."""
    return filename.startswith(_PACKAGE) or filename.startswith("<dualflow")


def _watched(owner: type, name: str) -> property:
    slot = _SLOTS[owner, name]
    field = f".{name}" if owner is Tensor else f"a tape node's .{name}"

    def read(obj: Any) -> Any:
        value = slot.__get__(obj, owner)
        if not _inside(sys._getframe(1).f_code.co_filename):
            hooks = tracing()
            if hooks is not None:
                hooks.on_raw_access(obj, f"reading {field}")
        return value

    def write(obj: Any, value: Any) -> None:
        if not _inside(sys._getframe(1).f_code.co_filename):
            hooks = tracing()
            if hooks is not None:
                hooks.on_raw_access(obj, f"writing {field}")
        slot.__set__(obj, value)

    return property(read, write, doc=slot.__doc__)


_PROPERTIES = {(owner, name): _watched(owner, name) for owner, name in FIELDS}


@contextmanager
def watching() -> Iterator[None]:
    """Make reads and writes of ``raw_array``/``raw_grad`` from outside dualflow visible to
    the running trace until the block ends.

    Example:
        >>> import dualflow
        >>> with watching():
        ...     type(Tensor.__dict__["raw_array"]).__name__
        'property'
        >>> type(Tensor.__dict__["raw_array"]).__name__
        'member_descriptor'
    """
    with _lock:
        _depth[0] += 1
        if _depth[0] == 1:
            for owner, name in FIELDS:
                setattr(owner, name, _PROPERTIES[owner, name])
    try:
        yield
    finally:
        with _lock:
            _depth[0] -= 1
            if _depth[0] == 0:
                for owner, name in FIELDS:
                    setattr(owner, name, _SLOTS[owner, name])


def unwatched(obj: Any, name: str = "raw_array") -> Any:
    """A raw field's value without telling a running trace: for tools that inspect a trace from
    its hooks (tests, profilers), never for code that computes with it.

    Example:
        >>> import numpy as np
        >>> unwatched(Tensor.wrap(np.ones(2), None, 0, False)).tolist()
        [1.0, 1.0]
    """
    owner = Tensor if isinstance(obj, Tensor) else Node
    return _SLOTS[owner, name].__get__(obj, owner)

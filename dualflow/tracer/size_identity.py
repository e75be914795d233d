"""Code that tells a size traced as an expression from an int: ``type(n)``, ``id(n)``, ``n is 4``.

Every conversion and comparison of a ``SymInt`` records a guard, and ``isinstance(n, int)`` is
True as in eager. What no method can answer as eager does is ``type(n)`` (``SymInt``, not
``int``), ``id(n)`` and ``is``: code branching on them (``if type(n) is int``) takes another path
while tracing than eager does, and both traces of a template's witness would take it alike. The
environment probe sees these in user code: a ``type()``/``id()`` of a size, or of a value it cannot
see (a dualflow call's result), and an ``is`` with a size, mark the trace's sizes untrusted and
fail it closed; the call is then traced again with plain sizes (``compiled.py``), or, when it
already changed Python state, raises rather than run twice.
"""

from __future__ import annotations

from typing import Any

from dualflow.ops.dispatch import tracing
from dualflow.symbolic_shapes import SYMBOLIC
from dualflow.tracer.provenance import TRUSTED, UNKNOWN


def told_apart(probe: Any, what: str, values: list[Any], line: str, unseen: bool) -> None:
    """Record ``what`` (``type()``, ``id()``, ``is``) applied to ``values`` in user code: when a
    trace with dynamic sizes runs and one of them is a size (or, with ``unseen``, a value the
    probe cannot see), the trace's sizes are untrusted and it fails closed.

    Example:
        >>> told_apart(None, "type()", [3], "f.py:1", True)  # no trace running: nothing
    """
    shapes = getattr(tracing(), "shapes", None)
    if shapes is None:
        return
    hidden = unseen and any(v is TRUSTED or v is UNKNOWN for v in values)
    if not hidden and not any(isinstance(v, SYMBOLIC) for v in values):
        return
    shapes.env.untrusted = shapes.env.untrusted or f"{what} of a size"
    probe.fail(
        f"{what} of a size, which this trace holds as an expression (an int in eager, a "
        "SymInt here): code branching on it would take another path than eager; the call is "
        "traced again with plain sizes",
        line,
    )

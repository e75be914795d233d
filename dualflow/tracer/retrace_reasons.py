"""How a compiled call names why it retraced: the closest earlier signature, a guard's value
as its kind, every part of the cache key with a readable path; and the caller's own numpy arrays
in place of the stand-ins a traced run handed the function."""

from __future__ import annotations

from typing import Any

from dualflow._config import config
from dualflow.errors import TracingError
from dualflow.tracer import pytree
from dualflow.tracer.array_argument import ArrayArgument, unwrap
from dualflow.tracer.signature import Flat


def without_proxies(out: Any) -> tuple[Any, list[str]]:
    """The result with the caller's own numpy arrays in place of the ``ArrayArgument``s the
    traced run handed the function, and the paths where they were."""
    try:
        leaves, paths, tree = pytree.flatten(out, "result", is_leaf=is_proxy)
    except TracingError:  # containers finish_trace refuses anyway: nothing was rebuilt
        return out, []
    if not leaves:
        return out, []
    return pytree.unflatten(tree, [unwrap(v) for v in leaves]), paths


def is_proxy(value: Any) -> bool:
    return type(value) is ArrayArgument


def closest(history: list[Any], flat: Flat) -> list[tuple[str, Any]]:
    """The described signature of the trace this call differs from least (for its reason)."""
    new = described(flat)

    def distance(trace: Any) -> int:
        old = trace.described
        if [p for p, _ in old] != [p for p, _ in new]:
            return len(new) + 1
        return sum(a != b for (_, a), (_, b) in zip(old, new))

    return min(reversed(history), key=distance).described


def as_kind(kind: str, value: Any) -> Any:
    """The value a guard saw as the Python value its ``kind`` (bool/int/float/item) gives."""
    return {"bool": bool, "int": int, "float": float}.get(kind, lambda v: v)(value)


def described(flat: Flat) -> list[tuple[str, Any]]:
    """Every part of the cache key with a readable path, for retrace reasons."""
    flags = zip(("grad_enabled", "train", "debug", "autocast"), config.snapshot())
    extra = [(f"config.{name}", ("static", type(value).__name__, value)) for name, value in flags]
    extra.append(("argument aliasing", ("static", "tuple", flat.aliases)))
    return flat.described + extra

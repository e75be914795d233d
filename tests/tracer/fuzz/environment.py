"""Fragments that exercise the tracer's view of the Python environment (issue 13).

Python values read outside the step's arguments (module globals, names through another module,
attributes of objects, closure cells, dict items, list contents, ``getattr``, default arguments)
that a between-calls hook changes on some call; Python side effects (appending to a list, setting
dict items and attributes) whose contents are compared after every call; ``bool()`` branches on
the data; and exceptions raised before the step writes anything, when a flag or the data say so.
A compiled step must retrace, replay or re-run exactly as eager does.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from dualflow import ops
from tests.tracer.fuzz.fragments import Context, Fragment, Statement, register
from tests.tracer.fuzz.scope import Scope
from tests.tracer.fuzz.spec import Piece

GLOBAL_SCALE = 1.0  # rebound by hooks: a module global read by a step
CONFIG = types.ModuleType("fuzz_config")  # a module whose attribute a step reads
CONFIG.SHIFT = 0.0
PACKAGE = types.ModuleType("fuzz_package")  # a package with a ``_version`` submodule (numba's)
PACKAGE._version = types.ModuleType("fuzz_package._version")
PACKAGE.SCALE = 1.0
READS = ("global", "module", "package", "attribute", "closure", "item", "contents", "getattr")
READS += ("default",)


def _set_global(value: float) -> None:
    global GLOBAL_SCALE
    GLOBAL_SCALE = value


def _read_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    return {
        "kind": draw(st.sampled_from(READS)),
        "change_at": draw(st.integers(1, 4)),
        "values": draw(st.sampled_from([(0.5, 1.5), (2.0, -1.0), (1.0, 1.0), (0.25, 0.75)])),
    }


def _environment_read(scope: Scope, piece: Piece) -> Statement:
    """``h`` scaled or shifted by a Python value of the environment that changes on one call."""
    kind, change_at = piece.get("kind"), piece.get("change_at")
    first, then = piece.get("values")
    box = types.SimpleNamespace(cfg=types.SimpleNamespace(alpha=first), table={"s": first})
    sizes = [first]
    scale = first

    def set_scale(value: float) -> None:
        nonlocal scale
        scale = value

    setters = {
        "global": _set_global,
        "module": lambda v: setattr(CONFIG, "SHIFT", v),
        "package": lambda v: setattr(PACKAGE, "SCALE", v),
        "attribute": lambda v: setattr(box.cfg, "alpha", v),
        "closure": set_scale,
        "item": lambda v: box.table.__setitem__("s", v),
        "contents": lambda v: sizes.append(v) if v != sizes[-1] else None,
        "getattr": lambda v: setattr(box, "gamma", v),
        "default": lambda v: setattr(box.cfg, "alpha", v),
    }

    def hook(call: int) -> None:
        if call == 0:  # every program starts from the same environment
            sizes[:] = [first]
            for name, setter in setters.items():
                if name != "contents":
                    setter(first)
        elif call == change_at:
            setters[kind](then)

    scope.between_calls(hook)
    return _reader(kind, box, sizes, lambda: scale)


def _reader(kind: str, box: Any, sizes: list, scale: Any) -> Statement:
    if kind == "global":
        return lambda h, env: h * GLOBAL_SCALE
    if kind == "module":
        return lambda h, env: h + CONFIG.SHIFT
    if kind == "package":
        return lambda h, env: h * PACKAGE.SCALE
    if kind == "attribute":
        return lambda h, env: h * box.cfg.alpha
    if kind == "closure":
        return lambda h, env: h * scale()
    if kind == "item":
        return lambda h, env: h + box.table["s"]
    if kind == "contents":

        def product(h: Any, env: Any) -> Any:
            for s in sizes:
                h = h * s
            return h

        return product
    if kind == "getattr":
        return lambda h, env: h * getattr(box, "gamma", 1.0)

    def with_default(h: Any, env: Any, cfg: Any = box.cfg) -> Any:
        return h * cfg.alpha

    return with_default


def _effects_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    return {"kind": draw(st.sampled_from(["append", "item", "attribute", "nested"]))}


def _side_effects(scope: Scope, piece: Piece) -> Statement:
    """Record values of ``h`` in Python objects (compared after every call), returning ``h``."""
    kind = piece.get("kind")
    log: list = []
    store: dict = {}
    meter = types.SimpleNamespace(last=None)
    for name, read in (
        ("log", lambda: log),
        ("store", lambda: store),
        ("meter", lambda: meter.last),
    ):
        tag = f"{name}{len(scope.extras)}"
        scope.track(tag + ".layout", lambda read=read: _layout(read()), undone=False)
        scope.track(tag + ".values", lambda read=read: _values(read()), undone=False)

    def record(h: Any, env: Any) -> Any:
        if kind == "append":
            log.append(ops.sum(h))
        elif kind == "item":
            store["mean"] = ops.mean(h)
        elif kind == "attribute":
            meter.last = h * 1.0
        else:
            store["stats"] = {"max": ops.max(h), "parts": [ops.min(h), ops.mean(h)]}
        return h

    return record


def _leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [leaf for k in sorted(value) for leaf in _leaves(value[k], f"{path}.{k}")]
    if isinstance(value, list | tuple):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{path}[{i}]")]
    return [(path, value)]


def _layout(value: Any) -> str:
    """The structure of a recorded value: where each leaf is and what it is."""
    return ";".join(f"{p}:{type(v).__name__}:{getattr(v, 'shape', '')}" for p, v in _leaves(value))


def _values(value: Any) -> np.ndarray:
    """Every tensor leaf's values, one after the other (compared bit for bit)."""
    parts = [np.ravel(v.numpy()) for _, v in _leaves(value) if hasattr(v, "numpy")]
    return np.concatenate(parts) if parts else np.zeros(0)


def _branch_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    return {"threshold": draw(st.sampled_from([-0.5, 0.0, 0.2, 1.0]))}


def _branch(scope: Scope, piece: Piece) -> Statement:
    """A data-dependent Python branch: ``bool()`` of a traced value becomes a guard."""
    threshold = piece.get("threshold")

    def branch(h: Any, env: Any) -> Any:
        if bool(ops.mean(h) > threshold):
            return h * 1.5
        return h - 0.25

    return branch


def _raise_draw(draw: Any, ctx: Context) -> dict[str, Any]:
    return {"kind": draw(st.sampled_from(["flag", "data"])), "at": draw(st.integers(1, 4))}


def raising_check(scope: Scope, piece: Piece, when: str = "") -> Callable[[Any], None]:
    """A check that raises on the piece's call ``at`` (a Python flag set between calls) or,
    for ``kind="data"``, when a value of the input is above 2.5 (read to the host); ``when``
    ends its messages."""
    flag = types.SimpleNamespace(on=False)
    at, suffix = piece.get("at"), f" ({when})" if when else ""
    scope.between_calls(lambda call: setattr(flag, "on", call == at))
    if piece.get("kind") == "flag":

        def check(env: Any) -> None:
            if flag.on:
                raise ValueError(f"the batch of call {at} is refused{suffix}")

    else:

        def check(env: Any) -> None:
            if bool(ops.max(env.x) > 2.5):
                raise ValueError(f"an input value above 2.5{suffix}")

    return check


def _raising(scope: Scope, piece: Piece) -> Statement:
    """Raise before the step writes anything (a prelude): on a flagged call, or when the data
    say so. Eagerly nothing was written either, so compiled and eager state must agree."""
    scope.prelude(raising_check(scope, piece))
    return lambda h, env: h


register(Fragment("environment_read", _read_draw, _environment_read, weight=3))
register(Fragment("side_effects", _effects_draw, _side_effects, weight=2))
register(Fragment("branch", _branch_draw, _branch))
register(Fragment("raise_early", _raise_draw, _raising))

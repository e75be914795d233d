"""Name captured state by how the function reaches it, and find it again in another process.

A trace captures tensors and modules by identity, which means nothing in a new process. Stored
plans name each one by an access path from a root the function can see (its closure, the globals
its code names, ``self``, its object arguments, the default RNG), e.g. ``closure.opt.state@3.m``.
"""

from __future__ import annotations

import types
from collections import deque
from collections.abc import Iterator
from typing import Any

from dualflow.tensor.core import Tensor
from dualflow.tensor.random import default_generators

Path = list[list[Any]]  # [["closure", "model"], ["attr", "_params"], ["item", "weight"], ...]

_OPAQUE = (
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    type,
    str,
    bytes,
    int,
    float,
    bool,
    complex,
    type(None),
)
# The compiler's own objects (traces, plans, tapes) hold captured state too, but by identity
# only: a path through them would not exist in another process.
_INTERNAL = ("dualflow.tracer", "dualflow.runtime", "dualflow.graph_ir", "dualflow.autograd")
_MAX_OBJECTS = 200_000  # a walk through a huge object graph gives up instead of stalling


class UnreachableState(LookupError):
    """A captured object is not reachable from the function's roots (the plan is not stored)."""


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def function_roots(fn: Any, args: tuple, kwargs: dict[str, Any]) -> dict[tuple, Any]:
    """The objects a call of ``fn`` can reach state through, keyed by a stable root name.

    Example:
        >>> import dualflow
        >>> w = dualflow.tensor([1.0])
        >>> sorted(function_roots(lambda x: x * w, (), {}))[0]
        ('global', 'w')
    """
    roots: dict[tuple, Any] = {}
    target = getattr(fn, "__func__", fn)
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        roots[("self",)] = owner
    if not isinstance(target, types.FunctionType):  # a Module or another callable object
        roots[("self",)] = fn
        target = getattr(type(fn), "forward", None) or type(fn).__call__
    if isinstance(target, types.FunctionType):
        code = target.__code__
        for name, cell in zip(code.co_freevars, target.__closure__ or ()):
            try:
                roots[("closure", name)] = cell.cell_contents
            except ValueError:  # an empty cell (a name bound later)
                continue
        for inner in _code_objects(code):
            for name in inner.co_names:
                if name in target.__globals__:
                    roots[("global", name)] = target.__globals__[name]
    for i, value in enumerate(args):
        roots[("arg", i)] = value
    for name, value in kwargs.items():
        roots[("kwarg", name)] = value
    for device, generator in default_generators().items():
        roots[("rng", str(device))] = generator
    return roots


def _children(obj: Any) -> Iterator[tuple[list[Any], Any]]:
    if type(obj).__module__.startswith(_INTERNAL):
        return
    if isinstance(obj, dict):
        for i, (key, value) in enumerate(obj.items()):
            # str/int keys are names; other keys (tensors in optimizer state) go by position
            step = ["item", key] if type(key) in (str, int) else ["at", i]
            yield step, value
    elif isinstance(obj, list | tuple):
        for i, value in enumerate(obj):
            yield ["item", i], value
    elif not isinstance(obj, Tensor) and hasattr(obj, "__dict__"):
        for name, value in vars(obj).items():
            yield ["attr", name], value


def find_paths(roots: dict[tuple, Any], wanted: list[Any]) -> list[Path]:
    """A shortest access path from ``roots`` to each object of ``wanted`` (by identity).

    Raises:
        UnreachableState: some object is reachable from no root.

    Example:
        >>> box = types.SimpleNamespace(items=[object(), object()])
        >>> find_paths({("closure", "box"): box}, [box.items[1]])
        [[['closure', 'box'], ['attr', 'items'], ['item', 1]]]
    """
    missing = {id(obj) for obj in wanted}
    found: dict[int, Path] = {}
    seen: set[int] = set()
    queue = deque((obj, [list(root)]) for root, obj in roots.items())
    while queue and missing and len(seen) < _MAX_OBJECTS:
        obj, path = queue.popleft()
        if id(obj) in seen or isinstance(obj, _OPAQUE):
            continue
        seen.add(id(obj))
        if id(obj) in missing:
            missing.discard(id(obj))
            found[id(obj)] = path
        for step, child in _children(obj):
            if id(child) not in seen and not isinstance(child, _OPAQUE):
                queue.append((child, [*path, step]))
    if missing:
        names = [getattr(o, "name", None) or type(o).__name__ for o in wanted if id(o) in missing]
        raise UnreachableState(f"captured state not reachable from the function: {names}")
    return [found[id(obj)] for obj in wanted]


def resolve(roots: dict[tuple, Any], path: Path) -> Any:
    """Follow ``path`` from ``roots``; raises ``UnreachableState`` when a step is missing.

    Example:
        >>> resolve({("arg", 0): {"w": [1, 2]}}, [["arg", 0], ["item", "w"], ["item", 1]])
        2
    """
    root = tuple(path[0])
    if root not in roots:
        raise UnreachableState(f"root {root} is not visible to the function now")
    obj = roots[root]
    for kind, key in path[1:]:
        try:
            if kind == "attr":
                obj = vars(obj)[key]
            elif kind == "at":
                obj = list(obj.values())[key]
            else:
                obj = obj[key]
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise UnreachableState(f"{format_path(path)} is not there now ({exc!r})") from None
    return obj


def format_path(path: Path) -> str:
    """A readable form of a path, for messages.

    Example:
        >>> format_path([["closure", "opt"], ["attr", "state"], ["at", 3], ["item", "m"]])
        'closure.opt.state@3["m"]'
    """
    parts = [".".join(str(p) for p in path[0])]
    for kind, key in path[1:]:
        if kind == "attr":
            parts.append(f".{key}")
        elif kind == "at":
            parts.append(f"@{key}")
        else:
            parts.append(f"[{key!r}]".replace("'", '"'))
    return "".join(parts)

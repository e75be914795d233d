"""Pytrees: the one walk over containers that call arguments and results both use.

``flatten`` turns a value into its leaves (in insertion order), their readable paths and a
``TreeDef`` saying which containers held them; ``unflatten`` rebuilds the value from new leaves,
with exactly the container types it had. ``encode``/``decode`` store a TreeDef in the plan cache.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from dualflow.errors import TracingError

LEAF, STATIC, OPAQUE = "leaf", "static", "opaque"
MAX_DEPTH = 100  # deeper nesting (or a container holding itself) is refused, not a RecursionError

# Exact types only: a subclass may carry attributes or an __init__ a rebuild would lose.
_EXACT = {
    tuple: "tuple",
    list: "list",
    dict: "dict",
    OrderedDict: "OrderedDict",
    defaultdict: "defaultdict",
}
DICTS = ("dict", "OrderedDict", "defaultdict")
_BY_TYPE: dict[type, str | None] = dict(_EXACT)  # kind_of's answers that follow from the type
_UNKNOWN: Any = object()


class TreeDef(NamedTuple):
    """One container of a pytree: its kind, what rebuilding it needs, and its children.

    ``data`` is the keys of a dict kind (``(default_factory, keys)`` for a defaultdict), the
    class of a namedtuple, ``(class, field names)`` of a dataclass, the value of a static leaf.
    """

    kind: str
    data: Any = None
    children: tuple[TreeDef, ...] = ()


_LEAF = TreeDef(LEAF)


class Unencodable(ValueError):
    """A TreeDef that the plan cache cannot store (the message says what it holds)."""


def kind_of(value: Any) -> str | None:
    """The container kind of ``value``: None for a leaf, ``OPAQUE`` for one not rebuilt exactly.

    Example:
        >>> kind_of((1, 2)), kind_of({"a": 1}), kind_of(3), kind_of(type("L", (list,), {})())
        ('tuple', 'dict', None, 'opaque')
    """
    cls = type(value)
    kind = _BY_TYPE.get(cls, _UNKNOWN)
    if kind is not _UNKNOWN:
        return kind
    if isinstance(value, tuple) and hasattr(cls, "_fields") and hasattr(cls, "_make"):
        return "namedtuple" if not getattr(value, "__dict__", None) else OPAQUE
    if dataclasses.is_dataclass(cls):
        names = {f.name for f in dataclasses.fields(cls)}
        return "dataclass" if set(getattr(value, "__dict__", ())) <= names else OPAQUE
    # a subclass of a container: its attributes and __init__ are unknown
    kind = OPAQUE if isinstance(value, tuple | list | dict) else None
    if len(_BY_TYPE) < 1000:  # the type alone decided: remember it (flatten runs every call)
        _BY_TYPE[cls] = kind
    return kind


def items(value: Any, kind: str) -> list[tuple[Any, Any]]:
    """(key, child) pairs of a container of ``kind``: positions, dict keys in insertion order,
    or dataclass field names.

    Example:
        >>> items({"b": 1, "a": 2}, "dict"), items(("x",), "tuple")
        ([('b', 1), ('a', 2)], [(0, 'x')])
    """
    if kind in DICTS:
        return list(value.items())
    if kind == "dataclass":  # every field set on it (init=False ones too), in declaration order
        missing = object()
        pairs = [(f.name, getattr(value, f.name, missing)) for f in dataclasses.fields(value)]
        return [(name, v) for name, v in pairs if v is not missing]
    return list(enumerate(value))


def _data(value: Any, kind: str, keys: tuple) -> Any:
    if kind == "defaultdict":
        return (value.default_factory, keys)
    if kind in DICTS:
        return keys
    if kind == "namedtuple":
        return type(value)
    if kind == "dataclass":
        return (type(value), keys)
    return None


class _Walk:
    """One flatten in progress: the options and what it found so far."""

    def __init__(
        self,
        is_leaf: Callable[[Any], bool] | None,
        opaque: bool,
        stop: Callable[[Any], bool] | None = None,
    ) -> None:
        self.is_leaf, self.opaque, self.stop = is_leaf, opaque, stop
        self.leaves: list[Any] = []
        self.paths: list[str] = []

    def walk(self, value: Any, path: str, depth: int) -> TreeDef:
        if self.stop is not None and self.stop(value):
            return TreeDef(STATIC, value)
        kind = kind_of(value)
        if kind == OPAQUE and (not self.opaque or isinstance(value, tuple | list | dict)):
            raise TracingError(_opaque_message(value, path))
        if kind is None or kind == OPAQUE:
            if self.is_leaf is not None and not self.is_leaf(value):
                return TreeDef(STATIC, value)
            self.leaves.append(value)
            self.paths.append(path)
            return _LEAF
        if depth >= MAX_DEPTH:
            raise TracingError(f"{path}: containers nested deeper than {MAX_DEPTH} (or a cycle)")
        pairs, depth = items(value, kind), depth + 1
        if kind in DICTS or kind == "dataclass":
            step = "[{!r}]" if kind in DICTS else ".{}"
            keys = tuple(k for k, _ in pairs)
            children = tuple(self.walk(v, path + step.format(k), depth) for k, v in pairs)
            return TreeDef(kind, _data(value, kind, keys), children)
        children = tuple(self.walk(v, f"{path}[{k}]", depth) for k, v in pairs)
        return TreeDef(kind, _data(value, kind, ()), children)


def _opaque_message(value: Any, path: str) -> str:
    name = f"{type(value).__module__}.{type(value).__qualname__}"
    return (
        f"{path} is a {name}: a compiled function cannot follow or rebuild it exactly (a "
        "subclass of tuple/list/dict, or a namedtuple or dataclass with attributes beyond its "
        "fields). Use a plain tuple, list, dict, OrderedDict, namedtuple or dataclass"
    )


def flatten(
    value: Any,
    path: str = "",
    *,
    is_leaf: Callable[[Any], bool] | None = None,
    opaque: bool = False,
    stop: Callable[[Any], bool] | None = None,
) -> tuple[list[Any], list[str], TreeDef]:
    """The leaves of ``value`` in order, their paths (``path`` names the root) and its TreeDef.

    Args:
        value: tuples, lists, dicts, OrderedDicts, defaultdicts, namedtuples and dataclass
            instances are walked (dicts in insertion order); anything else is a leaf.
        path: the root's name in the paths (``batch`` gives ``batch[0]``, ``batch['x']``).
        is_leaf: which non-container values are leaves; the others are kept in the TreeDef as
            statics (a result's numbers and strings). Default: all of them.
        opaque: make dataclasses with attributes beyond their fields leaves (arguments: reads
            through such an object are guarded) instead of raising TracingError. Other
            containers ``kind_of`` calls ``OPAQUE`` always raise it.
        stop: which values (containers included) are not walked into: kept in the TreeDef as
            statics, the same object at every ``unflatten`` (a stored side effect's objects
            that came from outside the call). Asked before anything else, at every depth.

    Raises:
        TracingError: a container that cannot be rebuilt exactly, naming its type and path, or
            nesting deeper than ``MAX_DEPTH``.

    Example:
        >>> leaves, paths, tree = flatten({"b": [1, 2], "a": (3,)}, "d")
        >>> leaves, paths
        ([1, 2, 3], ["d['b'][0]", "d['b'][1]", "d['a'][0]"])
        >>> unflatten(tree, [10, 20, 30])
        {'b': [10, 20], 'a': (30,)}
        >>> kept = [5]
        >>> leaves, _, tree = flatten({"kept": kept, "new": [6]}, stop=lambda v: v is kept)
        >>> leaves, unflatten(tree, [60])["kept"] is kept
        ([6], True)
    """
    walk = _Walk(is_leaf, opaque, stop)
    tree = walk.walk(value, path, 0)
    return walk.leaves, walk.paths, tree


def flatten_all(
    named: Iterable[tuple[str, Any]],
    *,
    is_leaf: Callable[[Any], bool] | None = None,
    opaque: bool = False,
) -> tuple[list[Any], list[str], tuple[TreeDef, ...]]:
    """``flatten`` of several roots at once (call arguments), each named by its path.

    Example:
        >>> flatten_all([("x", 1), ("kw", {"a": 2})])[:2]
        ([1, 2], ['x', "kw['a']"])
    """
    walk = _Walk(is_leaf, opaque)
    trees = tuple(walk.walk(value, path, 0) for path, value in named)
    return walk.leaves, walk.paths, trees


def count_leaves(tree: TreeDef) -> int:
    """How many leaves ``unflatten`` takes for ``tree``.

    Example:
        >>> count_leaves(flatten([1, (2, 3)])[2])
        3
    """
    if tree.kind == LEAF:
        return 1
    return sum(count_leaves(child) for child in tree.children)


def unflatten(tree: TreeDef, leaves: Iterable[Any]) -> Any:
    """Rebuild the value ``tree`` describes, with ``leaves`` in order in place of its leaves.

    Raises:
        ValueError: ``leaves`` holds fewer or more values than ``tree`` has leaves.

    Example:
        >>> from collections import OrderedDict
        >>> new = unflatten(flatten(OrderedDict(b=1, a=None), is_leaf=bool)[2], ["new"])
        >>> type(new).__name__, list(new.items())
        ('OrderedDict', [('b', 'new'), ('a', None)])
    """
    stream = iter(leaves)
    value = _build(tree, stream)
    if next(stream, _END) is not _END:
        raise ValueError("more leaves than the tree holds")
    return value


_END: Any = object()


def rebuilder(tree: TreeDef) -> Callable[[list], Any]:
    """``leaves -> unflatten(tree, leaves)`` made once for a tree rebuilt at every call (a
    compiled call's result): a lone leaf, and a tuple or list of leaves, by a short function
    (~0.15 us against ~0.7 for the walk); other trees by ``unflatten`` itself.

    Example:
        >>> build = rebuilder(flatten((1, 2))[2])
        >>> build(["a", "b"]), rebuilder(flatten([1, {"k": 2}])[2])(["a", "b"])
        (('a', 'b'), ['a', {'k': 'b'}])
    """
    if tree.kind == LEAF:
        return functools.partial(_flat_leaves, None, 1)
    if tree.kind in ("tuple", "list") and all(child.kind == LEAF for child in tree.children):
        container = tuple if tree.kind == "tuple" else list
        return functools.partial(_flat_leaves, container, len(tree.children))
    return functools.partial(unflatten, tree)


def _flat_leaves(container: type | None, count: int, leaves: list) -> Any:
    """``count`` leaves as ``container`` (None: the one leaf itself), or unflatten's error."""
    if len(leaves) != count:
        raise ValueError(
            "fewer leaves than the tree holds"
            if len(leaves) < count
            else "more leaves than the tree holds"
        )
    if container is None:
        return leaves[0]
    return container(leaves)


def _build(tree: TreeDef, leaves: Iterator[Any]) -> Any:
    kind, data, children = tree
    if kind == LEAF:
        leaf = next(leaves, _END)
        if leaf is _END:
            raise ValueError("fewer leaves than the tree holds")
        return leaf
    if kind == STATIC:
        return data
    return _REBUILD[kind](data, [_build(child, leaves) for child in children])


def _new_dataclass(data: tuple[type, tuple[str, ...]], values: list[Any]) -> Any:
    # The fields as they were, without running __init__/__post_init__ again (eager ran them
    # once; init=False fields keep the values the call gave them, frozen ones too).
    cls, names = data
    instance = object.__new__(cls)
    for name, value in zip(names, values):
        object.__setattr__(instance, name, value)
    return instance


_REBUILD: dict[str, Callable[[Any, list[Any]], Any]] = {
    "tuple": lambda data, values: tuple(values),
    "list": lambda data, values: values,
    "dict": lambda data, values: dict(zip(data, values)),
    "OrderedDict": lambda data, values: OrderedDict(zip(data, values)),
    "defaultdict": lambda data, values: defaultdict(data[0], zip(data[1], values)),
    "namedtuple": lambda data, values: data._make(values),
    "dataclass": _new_dataclass,
}

# What the plan cache stores: containers JSON can hold and whose type is in this closed table
# (decoding never looks a class up by a name read from the file).
_STORED = ("tuple", "list", "dict", "OrderedDict")
_STATICS = (bool, int, float, str, type(None))


def encode(tree: TreeDef) -> Any:
    """``tree`` as JSON data (plan cache); namedtuples, dataclasses, defaultdicts are refused.

    Raises:
        Unencodable: a container or static value that JSON and ``decode`` cannot hold.

    Example:
        >>> encode(flatten({"x": (1, "a")}, is_leaf=lambda v: v == 1)[2])
        {'dict': [['x', {'tuple': [{'leaf': None}, {'static': 'a'}]}]]}
    """
    kind, data, children = tree
    if kind == LEAF:
        return {LEAF: None}
    if kind == STATIC:
        if type(data) not in _STATICS:
            raise Unencodable(f"it returns a {type(data).__name__} (not JSON-storable)")
        return {STATIC: data}
    if kind not in _STORED:
        name = data.__name__ if kind == "namedtuple" else kind
        raise Unencodable(f"its return value holds a {name} (only tuples, lists, dicts)")
    if kind in DICTS:
        if not all(type(k) is str for k in data):
            raise Unencodable("its return value holds a dict with keys that are not strings")
        return {kind: [[k, encode(child)] for k, child in zip(data, children)]}
    return {kind: [encode(child) for child in children]}


def decode(data: Any, depth: int = 0) -> TreeDef:
    """The TreeDef ``encode`` stored, checked part by part.

    Raises:
        ValueError: anything ``encode`` does not write (an unknown kind, a static of another
            type, a malformed body, nesting deeper than ``MAX_DEPTH``).

    Example:
        >>> decode({"tuple": [{"leaf": None}, {"static": 3}]})
        TreeDef(kind='tuple', data=None, children=(TreeDef(kind='leaf', data=None, children=()), \
TreeDef(kind='static', data=3, children=())))
    """
    if not isinstance(data, dict) or len(data) != 1 or depth >= MAX_DEPTH:
        raise ValueError(f"not a stored output structure: {str(data)[:80]}")
    ((kind, body),) = data.items()
    if kind == LEAF and body is None:
        return _LEAF
    if kind == STATIC and type(body) in _STATICS:
        return TreeDef(STATIC, body)
    if kind in DICTS and kind in _STORED and isinstance(body, list):
        if not all(isinstance(p, list) and len(p) == 2 and type(p[0]) is str for p in body):
            raise ValueError(f"malformed stored {kind}")
        children = tuple(decode(child, depth + 1) for _, child in body)
        return TreeDef(kind, tuple(k for k, _ in body), children)
    if kind in ("tuple", "list") and isinstance(body, list):
        return TreeDef(kind, None, tuple(decode(child, depth + 1) for child in body))
    raise ValueError(f"not a stored output structure: {kind!r}")

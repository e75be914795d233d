"""The pytree module: flatten/unflatten round trips over random nested containers, paths, the
containers it refuses, and the plan cache's encoding of a TreeDef (compiled calls with each
container kind: test_pytree_compiled.py)."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow.errors import TracingError
from dualflow.tracer import pytree


class Point(NamedTuple):
    x: Any
    y: Any = 5


@dataclasses.dataclass
class Box:
    a: Any
    b: Any = None


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: Any
    scale: float = 1.0


@dataclasses.dataclass
class Derived:
    x: Any
    total: Any = dataclasses.field(init=False, default=None)

    def __post_init__(self) -> None:
        self.total = "set by __post_init__"


class MyList(list):
    pass


class MyDict(dict):
    pass


def _t(values: Any) -> dualflow.Tensor:
    return dualflow.tensor(np.asarray(values, np.float64))


# ---------------------------------------------------------------- flatten / unflatten


def _containers(children: Any) -> Any:
    keys = st.lists(st.text("abcxyz", min_size=1, max_size=3), max_size=4, unique=True)

    def dicts(kind: Any) -> Any:
        return keys.flatmap(
            lambda ks: st.lists(children, min_size=len(ks), max_size=len(ks)).map(
                lambda vs: kind(zip(ks, vs))
            )
        )

    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        dicts(dict),
        dicts(collections.OrderedDict),
        dicts(lambda pairs: collections.defaultdict(list, pairs)),
        st.tuples(children, children).map(lambda p: Point(*p)),
        st.tuples(children, children).map(lambda p: Box(*p)),
    )


LEAVES = st.one_of(st.none(), st.integers(-5, 5), st.text("pq", max_size=2), st.floats(0, 1))
TREES = st.recursive(LEAVES, _containers, max_leaves=20)


def _same(a: Any, b: Any) -> None:
    """Same types, keys in the same order and equal leaves, all the way down."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        if isinstance(a, collections.defaultdict):
            assert a.default_factory is b.default_factory
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, tuple | list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif dataclasses.is_dataclass(a):
        assert vars(a).keys() == vars(b).keys()
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, dualflow.Tensor | np.ndarray):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    else:
        assert a == b or (a != a and b != b)


@settings(max_examples=150, deadline=None)
@given(TREES)
def test_flatten_unflatten_round_trip(tree: Any) -> None:
    leaves, paths, treedef = pytree.flatten(tree, "root")
    assert len(paths) == len(leaves) == pytree.count_leaves(treedef)
    assert all(p.startswith("root") for p in paths)
    _same(pytree.unflatten(treedef, leaves), tree)
    assert pytree.flatten(pytree.unflatten(treedef, leaves), "root")[2] == treedef


@settings(max_examples=150, deadline=None)
@given(TREES)
def test_statics_stay_in_the_treedef_and_new_leaves_go_in_order(tree: Any) -> None:
    leaves, _, treedef = pytree.flatten(tree, is_leaf=lambda v: isinstance(v, int))
    assert all(isinstance(v, int) for v in leaves)
    rebuilt = pytree.unflatten(treedef, [v + 100 for v in leaves])
    assert pytree.flatten(rebuilt, is_leaf=lambda v: isinstance(v, int))[0] == [
        v + 100 for v in leaves
    ]


@settings(max_examples=150, deadline=None)
@given(TREES)
def test_encode_decode_round_trip_or_refuse(tree: Any) -> None:
    _, _, treedef = pytree.flatten(tree, is_leaf=lambda v: isinstance(v, float))
    try:
        data = pytree.encode(treedef)
    except pytree.Unencodable:  # namedtuples, dataclasses, defaultdicts are not stored
        kinds = repr(treedef)
        assert "namedtuple" in kinds or "dataclass" in kinds or "defaultdict" in kinds
        return
    assert pytree.decode(data) == treedef


@settings(max_examples=150, deadline=None)
@given(TREES)
def test_a_rebuilder_rebuilds_as_unflatten_does(tree: Any) -> None:
    # the compiled call's result builder: its short paths (a leaf, a flat tuple or list) and
    # the rest give unflatten's value, and its errors for a wrong leaf count
    leaves, _, treedef = pytree.flatten(tree, is_leaf=lambda v: isinstance(v, int))
    new = [v + 100 for v in leaves]
    build = pytree.rebuilder(treedef)
    _same(build(list(new)), pytree.unflatten(treedef, list(new)))
    for wrong in (new + [0], new[:-1]) if new else (["extra"],):
        with pytest.raises(ValueError, match=r"fewer|more"):
            build(wrong)


def test_dicts_keep_insertion_order() -> None:
    leaves, paths, _ = pytree.flatten({"b": 1, "a": 2, "c": {"z": 3, "y": 4}}, "d")
    assert leaves == [1, 2, 3, 4]
    assert paths == ["d['b']", "d['a']", "d['c']['z']", "d['c']['y']"]


def test_paths_of_namedtuples_and_dataclasses() -> None:
    _, paths, _ = pytree.flatten([Point(1, 2), Box(3, 4)], "batch")
    assert paths == ["batch[0][0]", "batch[0][1]", "batch[1].a", "batch[1].b"]


def test_unflatten_checks_the_leaf_count() -> None:
    _, _, treedef = pytree.flatten((1, [2]))
    with pytest.raises(ValueError, match="fewer"):
        pytree.unflatten(treedef, [1])
    with pytest.raises(ValueError, match="more"):
        pytree.unflatten(treedef, [1, 2, 3])


def test_subclasses_are_refused_with_type_and_path() -> None:
    for value in (MyList([1]), MyDict(a=1)):
        with pytest.raises(TracingError, match=r"out\['k'\] is a .*My(List|Dict)"):
            pytree.flatten({"k": value}, "out")
        with pytest.raises(TracingError):  # arguments too: their items could not be guarded
            pytree.flatten({"k": value}, "out", opaque=True)


def test_dataclass_with_extra_attributes_is_an_opaque_leaf_for_arguments() -> None:
    box = Box(1, 2)
    box.extra = 3
    with pytest.raises(TracingError, match="Box"):
        pytree.flatten([box], "out")
    assert pytree.flatten([box], "arg", opaque=True)[0] == [box]


def test_a_cycle_is_refused() -> None:
    loop: list = [1]
    loop.append(loop)
    with pytest.raises(TracingError, match="nested deeper"):
        pytree.flatten(loop, "x")


@pytest.mark.parametrize(
    "data",
    [
        {"namedtuple": [{"leaf": None}]},  # kinds encode refuses are never decoded
        {"dataclass": [["x", {"leaf": None}]]},
        {"module": "os"},
        {"static": [1, 2]},  # only plain scalars
        {"leaf": 0},
        {"dict": [[1, {"leaf": None}]]},  # keys are strings
        {"tuple": {"a": 1}},
        {"tuple": [], "list": []},
        "leaf",
    ],
)
def test_decode_refuses_anything_encode_does_not_write(data: Any) -> None:
    with pytest.raises(ValueError):
        pytree.decode(data)


def test_stop_keeps_the_objects_it_names_as_they_are_at_every_depth() -> None:
    outside, inner = {"a": [1, 2]}, (3, 4)
    seen: list[Any] = []

    def stop(value: Any) -> bool:
        seen.append(value)
        return value is outside or value is inner

    value = [outside, Point(inner, 7), [8]]
    leaves, paths, tree = pytree.flatten(value, "v", stop=stop)
    assert leaves == [7, 8] and paths == ["v[1][1]", "v[2][0]"]
    rebuilt = pytree.unflatten(tree, [70, 80])
    assert rebuilt[0] is outside and rebuilt[1].x is inner and rebuilt[1] == Point(inner, 70)
    assert rebuilt[2] == [80]
    assert all(v is not outside["a"] for v in seen)  # a stopped container is not walked into
    # asked before is_leaf, and stopped objects never become leaves
    leaves, _, tree = pytree.flatten(value, stop=stop, is_leaf=lambda v: v != 7)
    assert leaves == [8] and pytree.unflatten(tree, [9])[1] == Point(inner, 7)

"""Compiled vs eager for every container kind ``pytree`` knows, as results and as arguments, and
for the ones it refuses (those calls run eagerly with a warning naming the type and path); a
call changing its arguments' containers; an OrderedDict result through the plan cache."""

from __future__ import annotations

import collections
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dualflow
from tests.tracer.test_pytree import Box, Derived, Frozen, MyDict, MyList, Point, _same, _t

# ---------------------------------------------------------------- compiled vs eager: results


def _compare(fn: Any, make: Any, calls: int = 3) -> Any:
    """Call compiled and eager ``fn`` on fresh arguments; results must match in type and value."""
    compiled = dualflow.compile(fn)
    for i in range(calls):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # refused kinds warn once
            got = compiled(*make(i))
        want = fn(*make(i))
        _same(got, want)
    return compiled


def _one(i: int) -> tuple:
    return (_t([float(i), 1.0]),)


def test_ordered_dict_result_keeps_its_type() -> None:  # was a plain dict on main
    compiled = _compare(lambda x: collections.OrderedDict(b=x * 2, a=x + 1, tag="t"), _one)
    assert compiled.stats().plan_runs == 2


def test_defaultdict_result_keeps_type_and_factory() -> None:  # was a plain dict on main
    compiled = _compare(lambda x: collections.defaultdict(list, {"s": x.sum(), "n": 3}), _one)
    out = compiled(_t([1.0, 2.0]))
    assert out["missing"] == [] and compiled.stats().plan_runs == 3


def test_namedtuple_with_defaults_result() -> None:
    compiled = _compare(lambda x: Point(x * 2), _one)
    assert compiled.stats().plan_runs == 2


def test_frozen_dataclass_result() -> None:
    compiled = _compare(lambda x: Frozen(x * 2, 3.0), _one)
    assert compiled.stats().plan_runs == 2


def test_dataclass_init_false_field_result() -> None:  # main returned __post_init__'s value
    def fn(x: Any) -> Derived:
        out = Derived(x * 2)
        out.total = out.x.sum()
        return out

    compiled = _compare(fn, _one)
    assert compiled.stats().plan_runs == 2


@pytest.mark.parametrize("make", [MyDict, lambda **kw: MyList(kw.values())], ids=["dict", "list"])
def test_subclass_results_run_eagerly_with_a_warning(make: Any) -> None:  # dict: main's was dict
    fn = lambda x: make(a=x * 2, b=x + 1)  # noqa: E731
    compiled = _compare(fn, _one)
    assert compiled.stats().plan_runs == 0 and compiled.stats().eager_fallbacks >= 2
    with pytest.warns(RuntimeWarning, match=r"result\[?.*is a .*My(Dict|List)"):
        dualflow.compile(fn)(_t([1.0]))


# ---------------------------------------------------------------- compiled vs eager: arguments


def test_ordered_dict_and_defaultdict_arguments() -> None:
    def fn(od: Any, dd: Any) -> Any:
        return [v * 2 for v in od.values()] + [dd["a"] + 1]

    def make(i: int) -> tuple:
        od = collections.OrderedDict(z=_t([float(i)]), y=_t([1.0]))
        return od, collections.defaultdict(list, a=_t([float(i)]))

    compiled = _compare(fn, make)
    assert compiled.stats().plan_runs == 2


def test_argument_order_of_an_ordered_dict_is_part_of_the_signature() -> None:
    fn = lambda od: list(od.values())  # noqa: E731
    compiled = dualflow.compile(fn)
    a, b = _t([1.0]), _t([2.0])
    for od in (collections.OrderedDict(a=a, b=b), collections.OrderedDict(b=b, a=a)):
        _same(compiled(od), fn(od))
    assert compiled.stats().traces == 2


def test_namedtuple_frozen_and_init_false_dataclass_arguments() -> None:
    def fn(p: Point, f: Frozen, d: Derived) -> Any:
        return p.x * p.y + f.x * f.scale + d.x * (2.0 if d.total == "set by __post_init__" else 3)

    compiled = _compare(fn, lambda i: (Point(_t([i])), Frozen(_t([1.0]), 2.0), Derived(_t([i]))))
    assert compiled.stats().plan_runs == 2


def test_numpy_array_in_a_namedtuple_argument_is_not_baked_in() -> None:  # was on main
    fn = lambda p: dualflow.tensor(p.x * 2.0)  # noqa: E731  # numpy computation: fail closed
    _compare(fn, lambda i: (Point(np.array([float(i)])),))


def test_numpy_array_in_a_dict_subclass_argument_is_not_baked_in() -> None:  # was on main
    fn = lambda d: dualflow.tensor(d["a"] * 2.0)  # noqa: E731
    compiled = _compare(fn, lambda i: (MyDict(a=np.array([float(i)])),))
    assert compiled.stats().plan_runs == 0


def test_list_subclass_argument_attributes_are_not_baked_in() -> None:  # was on main
    def make(i: int) -> tuple:
        items = MyList([_t([1.0])])
        items.scale = float(i)
        return (items,)

    compiled = _compare(lambda items: items[0] * items.scale, make)
    assert compiled.stats().plan_runs == 0


def test_dataclass_argument_extra_attributes_are_guarded() -> None:  # was baked in on main
    box = Box(_t([1.0]))
    fn = lambda b: b.a * b.scale  # noqa: E731
    compiled = dualflow.compile(fn)
    for i in range(3):
        box.scale = float(i)
        _same(compiled(box), fn(box))
    assert compiled.stats().traces == 3


def test_cyclic_argument_runs_eagerly_with_a_warning() -> None:
    loop: list = [_t([1.0])]
    loop.append(loop)
    fn = lambda items: items[0] * 2  # noqa: E731
    with pytest.warns(RuntimeWarning, match="nested deeper"):
        _same(dualflow.compile(fn)(loop), fn(loop))


def _write_item(d: dict) -> Any:
    d["double"] = d["x"] * 2
    return d["x"] + 1


def _append(items: list) -> Any:
    items.append(items[0] * 2)
    return items[0] + 1


def _read_missing(d: Any) -> Any:
    return d["x"] * len(d["missing"])  # a defaultdict inserts the missing key, every call


@pytest.mark.parametrize(
    "fn, make",
    [
        (_write_item, lambda i: {"x": _t([float(i)])}),
        (_append, lambda i: [_t([float(i)])]),
        (_read_missing, lambda i: collections.defaultdict(list, x=_t([float(i)]))),
    ],
    ids=["dict item", "list append", "defaultdict missing key"],
)
def test_changes_to_argument_containers_happen_at_every_call(fn: Any, make: Any) -> None:
    # main: only the traced call changed the caller's container; plan runs silently did not
    compiled = dualflow.compile(fn)
    for i in range(3):
        got_arg, want_arg = make(i), make(i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = compiled(got_arg)
        _same(got, fn(want_arg))
        _same(got_arg, want_arg)
    assert compiled.stats().plan_runs == 0


def test_changed_argument_names_the_path() -> None:
    with pytest.warns(RuntimeWarning, match=r"changes its argument d\['double'\] in place"):
        dualflow.compile(_write_item)({"x": _t([1.0])})


def test_returned_numpy_argument_is_the_callers_array() -> None:
    # main: the traced call returned the ArrayArgument proxy, plan runs the first call's proxy
    fn = lambda a, x: {"y": x * 2, "a": [a]}  # noqa: E731
    compiled = dualflow.compile(fn)
    for i in range(3):
        a = np.array([float(i)])
        if i == 0:
            with pytest.warns(RuntimeWarning, match=r"numpy-array argument as result\['a'\]\[0\]"):
                out = compiled(a, _t([1.0]))
        else:
            out = compiled(a, _t([1.0]))
        assert out["a"][0] is a
        _same(out, fn(a, _t([1.0])))
    assert compiled.stats().plan_runs == 0


# ---------------------------------------------------------------- the plan cache


def ordered_result(x: Any) -> Any:
    return collections.OrderedDict(b=x * 2, a=[x + 1, "tag", None])


def test_ordered_dict_result_round_trips_through_the_plan_cache(tmp_path: Path) -> None:
    first = dualflow.compile(ordered_result, cache_dir=tmp_path)
    first(_t([1.0]))
    assert first.stats().cache_stores == 1, first.history[0].cache_note
    second = dualflow.compile(ordered_result, cache_dir=tmp_path)
    _same(second(_t([3.0])), ordered_result(_t([3.0])))
    assert second.stats().cache_loads == 1 and second.stats().traces == 0


def dataclass_result(x: Any) -> Any:
    return Box(x * 2, "s")


def test_dataclass_results_run_but_are_not_stored(tmp_path: Path) -> None:
    f = dualflow.compile(dataclass_result, cache_dir=tmp_path)
    _same(f(_t([1.0])), dataclass_result(_t([1.0])))
    assert "not stored" in f.history[0].cache_note and "dataclass" in f.history[0].cache_note

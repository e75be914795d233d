"""Argument and result structures of compiled functions (dicts, lists, dataclasses, namedtuples,
kwargs, numpy arrays, statics), compiled methods and nested compiled calls, all equal to eager.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from typing import Any

import numpy as np

import dualflow
from dualflow import ops
from tests.tracer.helpers import assert_same

Pair = namedtuple("Pair", "first second")


@dataclass
class Batch:
    x: Any
    scale: float


def _t(values: Any) -> dualflow.Tensor:
    return dualflow.tensor(np.asarray(values, np.float64))


def _calls(fn: Any, make_args: Any, n: int = 3) -> Any:
    compiled = dualflow.compile(fn, fallback="error")
    for i in range(n):
        args, kwargs = make_args(i)
        assert_same(compiled(*args, **kwargs), fn(*args, **kwargs), msg=f"call {i}")
    return compiled


def test_nested_argument_structures() -> None:
    def fn(d: dict, items: list, batch: Batch, pair: Pair, *, bias: Any) -> Any:
        return d["a"] * items[0] + batch.x * batch.scale + pair.second - bias

    def make(i: int) -> Any:
        args = (
            {"a": _t([i, 1.0]), "b": "unused"},
            [_t([2.0, i])],
            Batch(_t([1.0, -i]), 0.5),
            Pair(None, _t([i, i])),
        )
        return args, {"bias": _t([1.0, 2.0])}

    compiled = _calls(fn, make)
    assert compiled.stats().traces == 1 and compiled.stats().plan_runs == 2
    names = [v.name for v in compiled.history[0].graph.inputs]
    assert names == ["d['a']", "items[0]", "batch.x", "pair[1]", "bias"]


def test_numpy_array_arguments_are_inputs() -> None:
    def fn(a: np.ndarray, b: Any) -> Any:
        return ops.exp(dualflow.as_tensor(a)) * b

    compiled = _calls(fn, lambda i: ((np.array([0.0, float(i)]), _t([1.0, 2.0])), {}))
    assert compiled.stats().plan_runs == 2


def test_result_structures() -> None:
    def fn(x: Any) -> Any:
        return {"sum": x.sum(), "parts": [x * 2, (x + 1, None)], "tag": "ok", "n": 3}

    compiled = _calls(fn, lambda i: ((_t([i, 1.0]),), {}))
    out = compiled(_t([5.0, 1.0]))
    assert out["tag"] == "ok" and out["n"] == 3 and out["parts"][1][1] is None
    assert isinstance(out["parts"], list) and isinstance(out["parts"][1], tuple)
    assert compiled.stats().plan_runs == 3


def test_namedtuple_result() -> None:
    _calls(lambda x: Pair(x * 2, x + 1), lambda i: ((_t([float(i)]),), {}))


def test_dataclass_result() -> None:
    compiled = dualflow.compile(lambda x: Batch(x * 2, 1.0), fallback="error")
    for i in range(3):
        assert compiled(_t([float(i)])).x.tolist() == [2.0 * i]


class _Scaler:
    def __init__(self, factor: float) -> None:
        self.w = _t([factor, factor])

    @dualflow.compile
    def __call__(self, x: Any) -> Any:
        return x * self.w


def test_compiled_method_uses_each_instance() -> None:
    a, b = _Scaler(2.0), _Scaler(3.0)
    for i in range(3):
        x = _t([1.0, float(i)])
        assert a(x).tolist() == [2.0, 2.0 * i]
        assert b(x).tolist() == [3.0, 3.0 * i]
    stats = _Scaler.__call__.stats()
    assert stats.traces == 2 and stats.plan_runs == 4


def test_nested_compiled_function_is_inlined() -> None:
    inner = dualflow.compile(lambda x: ops.tanh(x) * 3)

    def outer_fn(x: Any) -> Any:
        return inner(x) + inner(x * 2)

    outer = dualflow.compile(outer_fn, fallback="error")
    for i in range(3):
        x = _t([0.1 * i, -1.0])
        want = inner.fn(x) + inner.fn(x * 2)
        assert_same(outer(x), want, msg=f"call {i}")
    assert inner.stats().calls == 0  # inlined into the outer trace
    assert outer.stats().plan_runs == 2
    ops_used = [n.op for n in outer.history[0].graph.nodes]
    assert ops_used.count("tanh") == 2


def test_dict_argument_order_is_part_of_the_signature() -> None:
    # The same keys in another insertion order are another program when the function iterates
    # the dict; sorting keys in the signature once replayed the first order for both.
    def fn(d: dict) -> Any:
        return dualflow.cat(list(d.values()), 0)

    a, b = _t([1.0, 1.0]), _t([0.0, 0.0, 0.0])
    _calls(fn, lambda i: (({"a": a, "b": b} if i % 2 == 0 else {"b": b, "a": a},), {}), n=4)


def test_keyword_argument_order_is_part_of_the_signature() -> None:
    def fn(**tensors: Any) -> Any:
        return dualflow.cat(list(tensors.values()), 0)

    a, b = _t([1.0]), _t([2.0, 3.0])
    _calls(fn, lambda i: ((), {"a": a, "b": b} if i % 2 == 0 else {"b": b, "a": a}), n=4)

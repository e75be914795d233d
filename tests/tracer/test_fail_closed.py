"""Fail closed: raw array reads and Module attribute writes inside a compiled function raise
TracingError at the user's line (or fall back to eager with a warning); a user error while tracing
propagates and leaves captured state as it was.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.errors import ShapeError, TracingError
from dualflow.nn import Parameter
from tests.tracer.helpers import assert_same

FILE = "test_fail_closed.py"


def _line(fn: Callable, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if marker in text)


def _read_array(x: Any) -> Any:
    return x * float(x.array.sum())  # offending


def _read_numpy(x: Any) -> Any:
    return x * float(x.numpy().sum())  # offending


def _read_asarray(x: Any) -> Any:
    return x * float(np.asarray(x).sum())  # offending


READERS = [_read_array, _read_numpy, _read_asarray]


@pytest.mark.parametrize("fn", READERS, ids=["array", "numpy", "asarray"])
def test_raw_reads_raise_with_the_user_line(fn: Callable) -> None:
    compiled = dualflow.compile(fn, fallback="error")
    with pytest.raises(TracingError) as info:
        compiled(dualflow.tensor([1.0, 2.0]))
    message = str(info.value)
    assert f"{FILE}:{_line(fn, '# offending')}" in message, message
    assert "instead" in message  # says how to fix it


@pytest.mark.parametrize("fn", READERS, ids=["array", "numpy", "asarray"])
def test_raw_reads_fall_back_to_eager_with_a_warning(fn: Callable) -> None:
    compiled = dualflow.compile(fn)
    # the warning carries the TracingError: what was read and the user's line
    with pytest.warns(RuntimeWarning, match=rf"(?s)fail closed\): .*{FILE}:\d+"):
        got = compiled(dualflow.tensor([1.0, 2.0]))
    assert got.tolist() == [3.0, 6.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: later calls are quietly eager
        assert compiled(dualflow.tensor([2.0, 2.0])).tolist() == [8.0, 8.0]
    assert compiled.stats().traces == 0 and compiled.stats().eager_fallbacks == 2


class _Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = Parameter(np.ones(2))
        self.calls = 0

    def forward(self, x: Any) -> Any:
        self.calls = self.calls + 1  # attribute write
        return x * self.w


def test_module_attribute_write_raises_naming_module_and_line() -> None:
    model = _Counter()
    compiled = dualflow.compile(lambda x: model(x), fallback="error")
    with pytest.raises(TracingError) as info:
        compiled(dualflow.tensor(np.ones(2)))
    message = str(info.value)
    assert "_Counter.calls" in message
    assert f"{FILE}:{_line(_Counter.forward, '# attribute write')}" in message
    assert "ops.assign" in message


def test_fallback_after_backward_does_not_double_gradients() -> None:
    w = Parameter(np.array([1.0, 2.0]))

    def step(x: Any) -> Any:
        (w * x).sum().backward()
        return x * float(x.numpy().sum())

    with pytest.warns(RuntimeWarning):
        dualflow.compile(step)(dualflow.tensor(np.array([3.0, 4.0])))
    assert w.grad.tolist() == [3.0, 4.0]


def test_tensor_of_an_array_argument_is_not_baked_in() -> None:
    def fn(data: np.ndarray) -> Any:
        return dualflow.tensor(data) * 2

    compiled = dualflow.compile(fn)
    for values in ([1.0, 2.0], [5.0, 6.0], [7.0, 8.0]):
        data = np.array(values)
        assert compiled(data).tolist() == fn(data).tolist()


def test_user_error_propagates_and_rolls_back_state() -> None:
    w = Parameter(np.array([1.0, 2.0, 3.0]))
    gen = dualflow.random.Generator(9)

    def step(x: Any) -> Any:
        with dualflow.no_grad():
            ops.assign(w, w * 10)
        noise = ops.dropout(w, 0.5, train=True, generator=gen)
        return ops.matmul(x, noise)  # ShapeError for a bad x

    compiled = dualflow.compile(step)
    good = dualflow.tensor(np.ones((2, 3)))
    compiled(good)
    compiled(good)
    before_w, before_rng = w.numpy().copy(), gen.state.numpy().copy()
    with pytest.raises(ShapeError):
        compiled(dualflow.tensor(np.ones((2, 4))))  # a new shape: traced, and fails
    np.testing.assert_array_equal(w.numpy(), before_w)
    np.testing.assert_array_equal(gen.state.numpy(), before_rng)
    compiled(good)  # still usable afterwards, from the same state
    np.testing.assert_array_equal(w.numpy(), before_w * 10)


@pytest.mark.parametrize(
    "make_opt",
    [
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: optim.Adam(ps, lr=0.1),
    ],
    ids=["momentum", "adam"],
)
def test_error_after_the_optimizer_step_leaves_optimizer_state(make_opt: Callable) -> None:
    w = Parameter(np.array([1.0, -2.0]))
    opt = make_opt([w])

    def step(x: Any, fail: bool) -> Any:
        opt.zero_grad()
        loss = ((w * x) ** 2).sum()
        loss.backward()
        opt.step()
        if fail:
            raise ValueError("bad batch")
        return loss.detach()

    step(dualflow.tensor(np.ones(2)), False)  # eager warm-up: optimizer state exists
    compiled = dualflow.compile(step)
    compiled(dualflow.tensor(np.ones(2)), False)
    saved = [w.numpy().copy()] + [t.numpy().copy() for _, t in sorted(opt.state[w].items())]
    with pytest.raises(ValueError, match="bad batch"):
        compiled(dualflow.tensor(np.ones(2)), True)
    after = [w.numpy()] + [t.numpy() for _, t in sorted(opt.state[w].items())]
    assert_same(after, saved)


def test_a_failing_pass_leaves_state_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    from dualflow.errors import CompileError
    from dualflow.passes import manager

    def broken(graph):
        raise CompileError("broken pass: refuses every graph")

    monkeypatch.setitem(manager.PASSES, "broken", broken)
    w = Parameter(np.array([1.0, 2.0], np.float32))

    @dualflow.compile(passes=("broken",))
    def step(x):
        ops.assign(w, w * x)
        return w.sum()

    with pytest.raises(CompileError, match="broken pass"):
        step(dualflow.tensor([3.0, 3.0]))
    assert w.tolist() == [1.0, 2.0]


def test_a_retrace_is_explained_against_the_closest_trace() -> None:
    f = dualflow.compile(lambda x, scale: x * scale)
    f(dualflow.tensor(np.ones(3, np.float32)), 2.0)
    f(dualflow.tensor(np.ones(2, np.float32)), 2.0)  # x.shape[0]: 3 -> 2
    f(dualflow.tensor(np.ones(2, np.float32)), 5.0)  # only scale differs from the second
    assert f.stats().retrace_reasons[1:] == ["x.shape[0]: 3 -> 2", "scale: 2.0 -> 5.0"]

"""When a trace with dynamic sizes fails, or code tells a size from an int (issue 39): the call
equals eager's, is never run twice where the first run changed Python state, and later calls
trace plain sizes (``tracer/dynamic_dims.py``, ``tracer/size_identity.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow as df


def test_code_that_refuses_symbolic_sizes_is_traced_with_concrete_ones() -> None:
    def f(x):
        n = x.shape[0]
        if type(n) is not int:  # library code that takes only a real int
            raise TypeError("size must be an int")
        return x * 2 + n

    g = df.compile(f, passes="exact")
    for n in [3, 4, 5, 3, 4]:
        x = df.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2))
        np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())
    stats = g.stats()
    assert stats.traces == 3 and stats.plan_runs == 2 and stats.eager_fallbacks == 0
    assert "with symbolic ones it TypeError: size must be an int" in stats.retrace_reasons[1]
    assert "given up" in str(df.explain(g))


def test_a_genuine_error_is_raised_once_traced_concretely() -> None:
    def f(x):
        return x.reshape(-1, 5)  # 4 * 2 elements do not split into rows of 5

    g = df.compile(f)
    g(df.ones(5, 2))
    with pytest.raises(df.errors.ShapeError):  # the dynamic trace, then the concrete one
        g(df.ones(4, 2))
    assert "given up" in str(df.explain(g))


def test_a_failed_dynamic_trace_that_changed_python_state_is_not_run_twice() -> None:
    # run again with plain sizes, the call would append twice; eager appends once per call
    log: list = []

    def f(x):
        log.append(1)  # replayed by plans (an append to an outside list)
        if type(x.shape[0]) is not int:  # library code that takes only a real int
            raise TypeError("size must be an int")
        return x * 2

    g = df.compile(f)
    g(df.ones(3, 2))
    with pytest.raises(TypeError) as raised:
        g(df.ones(4, 2))
    assert log == [1, 1]  # as eager: one append per call, the failing one included
    notes = getattr(raised.value, "__notes__", [])
    assert not hasattr(raised.value, "add_note") or any("not run again" in n for n in notes)
    for n in [4, 5, 6]:  # later calls trace plain sizes, once each
        x = df.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2))
        np.testing.assert_array_equal(g(x).numpy(), (x * 2).numpy())
    assert len(log) == 5


def test_a_dynamic_trace_that_fails_closed_keeps_its_eager_result() -> None:
    # the run was eager's (its Python decided by guarded comparisons): its result and effects
    # stand, the call is not run again, and the function leaves the fast path as any trace
    # that fails closed does
    log: list = []

    def f(x):
        log.append(1)
        if x.shape[0] > 3:
            return x * float(x.numpy().sum())  # reading values: the trace fails closed
        return x * 2.0 + 1.0

    g = df.compile(f)
    with pytest.warns(RuntimeWarning, match="lazy re-execution"):
        for n in [3, 4, 3, 5]:
            x = df.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2))
            want = x * float(x.numpy().sum()) if n > 3 else x * 2.0 + 1.0
            np.testing.assert_array_equal(g(x).numpy(), want.numpy())
    assert log == [1, 1, 1, 1]


@pytest.mark.parametrize(
    "told",
    [
        lambda n: type(n) is int,  # a size held as an expression is a SymInt
        lambda n: n is 4,  # noqa: F632 - eager's small ints are one object
        lambda n: id(n) == id(4),
    ],
)
def test_code_telling_a_size_from_an_int_gets_eager_s_branch(told) -> None:
    def f(x):
        n = x.shape[0]
        return x * (2.0 if told(n) else 3.0)

    g = df.compile(f, dynamic=True)
    for n in [3, 4, 5, 4]:
        x = df.ones(n, 2)
        np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())


def test_telling_a_size_from_an_int_after_changing_python_state_raises() -> None:
    log: list = []

    def f(x):
        log.append(1)
        return x * (2.0 if type(x.shape[0]) is int else 3.0)

    g = df.compile(f, dynamic=True)
    with pytest.raises(df.errors.TracingError, match="not run again"):
        g(df.ones(3, 2))
    assert log == [1]  # never twice
    np.testing.assert_array_equal(g(df.ones(4, 2)).numpy(), f(df.ones(4, 2)).numpy())

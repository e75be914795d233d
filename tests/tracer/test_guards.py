"""Guards and retracing: signature changes, config flags, Module versions, data-dependent branches
(transactional: a failed guard commits nothing), max_traces, and turning compilation off.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import warnings
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.nn import Parameter
from tests.tracer.helpers import assert_same, check_all_traces


def _t(values: Any, **kw: Any) -> dualflow.Tensor:
    return dualflow.tensor(np.asarray(values, np.float64), **kw)


def test_shape_change_retraces_and_names_the_dimension() -> None:
    compiled = dualflow.compile(lambda x: (x * 2).sum(axis=0))
    for n in (32, 32, 48, 48, 32):
        x = _t(np.arange(n * 3).reshape(n, 3))
        assert_same(compiled(x), (x * 2).sum(axis=0))
    stats = compiled.stats()
    assert stats.traces == 2 and stats.plan_runs == 3
    assert stats.retrace_reasons == ["first call", "x.shape[0]: 32 -> 48"]


def test_dtype_and_static_argument_changes_retrace() -> None:
    def fn(x: Any, scale: float, mode: str) -> Any:
        return x * scale if mode == "mul" else x + scale

    compiled = dualflow.compile(fn)
    x = _t([1.0, 2.0])
    calls = [(x, 2.0, "mul"), (x, 2.0, "mul"), (x, 3.0, "mul"), (x, 3.0, "add")]
    calls.append((dualflow.tensor([1.0, 2.0], dtype="float32"), 3.0, "add"))
    for args in calls:
        assert_same(compiled(*args), fn(*args))
    assert compiled.stats().retrace_reasons[1:] == [
        "scale: 2.0 -> 3.0",
        "mode: 'mul' -> 'add'",
        "x.dtype: float64 -> float32",
    ]


def test_train_flag_is_part_of_the_key() -> None:
    compiled = dualflow.compile(lambda x: ops.dropout(x, 0.5))
    x = _t(np.ones((4, 4)))
    dualflow.random.seed(0)
    compiled(x)
    with dualflow.using_config(train=False):
        assert_same(compiled(x), x)
        assert_same(compiled(x), x)
    assert compiled.stats().traces == 2 and compiled.stats().plan_runs == 1


def test_config_retrace_reason_names_the_flag() -> None:
    compiled = dualflow.compile(lambda x: x * 2)
    compiled(_t([1.0]))
    with dualflow.using_config(train=False):
        compiled(_t([1.0]))
    assert "train" in compiled.stats().retrace_reasons[1]


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: Any) -> Any:
        y = self.lin(x)
        extra = self.__dict__.get("extra")
        return y if extra is None else extra(y)


def test_changing_a_captured_module_retraces() -> None:
    net = _Net()
    compiled = dualflow.compile(lambda x: net(x).detach())
    x = dualflow.tensor(np.ones((2, 3), np.float32))
    compiled(x)
    compiled(x)
    net.lin = nn.Linear(3, 2)  # a new layer with new weights
    assert_same(compiled(x), net(x).detach())
    net.extra = nn.Linear(2, 2)  # a new submodule used by forward
    assert_same(compiled(x), net(x).detach())
    assert_same(compiled(x), net(x).detach())
    stats = compiled.stats()
    assert stats.traces == 3 and stats.plan_runs == 2
    assert all("_Net was modified (version" in r for r in stats.retrace_reasons[1:])


def test_module_eval_after_compiling_switches_dropout_off() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    compiled = dualflow.compile(lambda x: model(x).detach())
    x = dualflow.tensor(np.ones((3, 4), np.float32))
    compiled(x)
    compiled(x)
    model.eval()
    assert_same(compiled(x), model(x).detach())


def test_changing_dropout_probability_retraces() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    compiled = dualflow.compile(lambda x: model(x).detach())
    x = dualflow.tensor(np.ones((3, 4), np.float32))
    compiled(x)
    model[1].p = 0.0
    assert_same(compiled(x), model(x).detach())


def _branch_step(w: Parameter, threshold: float, guard_first: bool) -> Any:
    opt = optim.SGD([w], lr=0.001)

    def step(x: Any) -> Any:
        opt.zero_grad()
        loss = (w * x).sum() ** 2
        loss.backward()
        if guard_first and loss > threshold:
            ops.assign(w, w * 0.9)
        opt.step()  # an update that must be applied exactly once per call
        if not guard_first and loss > threshold:
            ops.assign(w, w * 0.9)
        return loss.detach()

    return step


@pytest.mark.parametrize("guard_first", [True, False], ids=["guard-then-update", "update-first"])
def test_data_dependent_branch_flips_and_never_double_applies(guard_first: bool) -> None:
    scales = [3.0, 3.0, 3.0, 0.1, 0.1, 3.0, 0.1]  # the branch flips at steps 3, 5 and 6
    w_c, w_e = Parameter(np.ones(4)), Parameter(np.ones(4))
    compiled = dualflow.compile(_branch_step(w_c, 1.0, guard_first), fallback="error")
    eager = _branch_step(w_e, 1.0, guard_first)
    for i, s in enumerate(scales):
        x = _t(np.full(4, s) + np.arange(4) * 0.01)
        assert_same(compiled(x), eager(x), msg=f"loss {i}")
        assert_same(w_c, w_e, msg=f"w after step {i}")
    stats = compiled.stats()
    # step 3 fails A's guard and traces B; step 5 fails B (newest first) and runs A
    assert (stats.traces, stats.guard_failures, stats.plan_runs) == (2, 2, 7), stats
    assert stats.retrace_reasons[1].startswith("guard bool() == True failed at test_guards.py:")
    check_all_traces(compiled)


def test_max_traces_warns_once_and_stays_correct() -> None:
    def fn(x: Any) -> Any:
        return x * x.sum().item()

    line = inspect.getsourcelines(fn)[1] + 1
    compiled = dualflow.compile(fn, max_traces=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(6):
            x = _t([1.0, float(i)])
            assert_same(compiled(x), fn(x))
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(runtime) == 1, [str(w.message) for w in runtime]
    message = str(runtime[0].message)
    assert "max_traces=2" in message
    assert re.search(rf"guard item\(\) == [0-9.]+ failed at test_guards.py:{line}\b", message)
    assert compiled.stats().traces == 2 and compiled.stats().eager_fallbacks == 4


def test_guard_on_nan_holds() -> None:
    compiled = dualflow.compile(lambda x: x * 2 if float(x.sum()) != 0 else x)
    x = _t([np.nan, 1.0])
    for _ in range(3):
        compiled(x)
    assert compiled.stats().traces == 1


def test_disable_compile_runs_eagerly() -> None:
    calls = []

    def fn(x: Any) -> Any:
        calls.append(1)
        return x + 1

    compiled = dualflow.compile(fn)
    dualflow.disable_compile()
    try:
        for _ in range(3):
            assert_same(compiled(_t([1.0])), _t([2.0]))
    finally:
        dualflow.disable_compile(False)
    assert len(calls) == 3 and compiled.stats().traces == 0
    compiled(_t([1.0]))
    compiled(_t([1.0]))
    # the append is a side effect: the plan run replays it, as the eager call would do it
    assert len(calls) == 5 and compiled.stats().plan_runs == 1


def test_disable_compile_environment_variable() -> None:
    script = (
        "import dualflow, numpy as np\n"
        "n = []\n"
        "f = dualflow.compile(lambda x: n.append(1) or x * 2)\n"
        "for _ in range(3): assert f(dualflow.tensor([1.0])).tolist() == [2.0]\n"
        "print(len(n), f.stats().traces, f.stats().plan_runs)\n"
    )
    env = {**os.environ, "DUALFLOW_DISABLE_COMPILE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["3", "0", "0"]
    env["DUALFLOW_DISABLE_COMPILE"] = "0"
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["3", "1", "2"]  # the append is replayed by plan runs


def test_max_traces_warning_points_at_the_caller() -> None:
    compiled = dualflow.compile(lambda x: x * x.sum().item(), max_traces=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled(_t([1.0]))
        compiled(_t([2.0]))
    (warning,) = caught
    assert warning.filename == __file__


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_debug_mode_checks_plan_runs_too() -> None:
    compiled = dualflow.compile(lambda x: ops.log(x))
    dualflow.set_debug(True)
    try:
        with pytest.raises(dualflow.errors.NumericalError):
            ops.log(_t([-1.0]))  # eager
        compiled(_t([1.0]))
        compiled(_t([2.0]))
        with pytest.raises(dualflow.errors.NumericalError):
            compiled(_t([-1.0]))
    finally:
        dualflow.set_debug(False)


def test_freezing_a_parameter_after_compiling_retraces() -> None:
    results = []
    for compiled_side in (False, True):
        a, b = Parameter(np.array([1.0, 2.0])), Parameter(np.array([3.0, 4.0]))
        opt = optim.SGD([a, b], lr=0.1)

        def step(x: Any, a: Any = a, b: Any = b, opt: Any = opt) -> None:
            opt.zero_grad()
            (a * b * x).sum().backward()
            opt.step()

        fn = dualflow.compile(step) if compiled_side else step
        for i in range(4):
            if i == 2:
                a.requires_grad_(False)
            fn(_t([1.0, 1.0]))
        results.append([a.numpy().copy(), b.numpy().copy()])
    assert_same(results[1], results[0])


def test_a_failed_guard_reason_says_what_this_call_saw() -> None:
    compiled = dualflow.compile(lambda x: x * x.sum().item(), max_traces=2)
    for v in (1.0, 2.0):
        compiled(_t([v]))
    assert compiled.stats().retrace_reasons[-1].endswith("(this call: 2.0)")

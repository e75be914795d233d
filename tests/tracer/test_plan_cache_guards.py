"""A plan loaded from the on-disk cache is checked against the same guards as a traced one:
module classes and settings, optimizer hyperparameters and every Python value the trace read
(issue 13, hole 11). Each test stores a plan with one setting and loads it with another, in a
second compiled function (a fresh process sees exactly what a fresh function sees)."""

from __future__ import annotations

import sys
import types
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.errors import KERNEL_MODULE_PREFIX
from dualflow.kernels.fused_cpu import fused_elementwise
from dualflow.kernels.numba import numba_elementwise

SETTINGS = types.SimpleNamespace(use_bias_shift=False, table={"scale": 1.0})


def _batch():
    rng = np.random.default_rng(0)
    return dualflow.tensor(rng.normal(size=(8, 4)).astype(np.float32)), dualflow.tensor(
        rng.integers(0, 3, 8)
    )


def _make(cache: Path, activation: nn.Module, momentum: float = 0.0):
    dualflow.random.seed(0)
    model = nn.Sequential(nn.Linear(4, 6), activation, nn.Linear(6, 3))
    opt = optim.SGD(list(model.params()), lr=0.1, momentum=momentum)

    def step(x, t):
        opt.zero_grad()
        out = model(x) * SETTINGS.table["scale"]
        if SETTINGS.use_bias_shift:
            out = out + 1.0
        loss = ops.softmax_cross_entropy(out, t)
        loss.backward()
        opt.step()
        return loss

    return dualflow.compile(step, cache_dir=cache), step


def _losses(fn, n: int = 3) -> list[float]:
    x, t = _batch()
    return [fn(x, t).item() for _ in range(n)]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (lambda: nn.ReLU(), lambda: nn.Tanh()),
        (lambda: nn.LeakyReLU(0.1), lambda: nn.LeakyReLU(0.3)),
    ],
    ids=["relu-vs-tanh", "leaky-slope"],
)
def test_a_different_layer_with_the_same_parameters_is_not_loaded(tmp_path, first, second):
    stored, _ = _make(tmp_path, first())
    _losses(stored)
    assert stored.stats().cache_stores == 1
    loaded, _ = _make(tmp_path, second())
    got = _losses(loaded)
    _, fresh = _make(tmp_path / "unused", second())
    assert got == _losses(fresh) and loaded.stats().cache_loads == 0


def test_a_different_momentum_is_not_loaded(tmp_path: Path) -> None:
    stored, _ = _make(tmp_path, nn.Tanh(), momentum=0.0)
    _losses(stored, 4)
    loaded, _ = _make(tmp_path, nn.Tanh(), momentum=0.9)
    _, fresh = _make(tmp_path / "unused", nn.Tanh(), momentum=0.9)
    assert _losses(loaded, 4) == _losses(fresh, 4)


def test_python_values_the_trace_read_are_checked_on_load(tmp_path: Path) -> None:
    try:
        stored, _ = _make(tmp_path, nn.Tanh())
        _losses(stored)
        for change in (
            lambda: setattr(SETTINGS, "use_bias_shift", True),  # a flag that issues no op
            lambda: SETTINGS.table.update(scale=2.0),  # a dict config value
        ):
            change()
            loaded, _ = _make(tmp_path, nn.Tanh())
            _, fresh = _make(tmp_path / "unused", nn.Tanh())
            assert _losses(loaded) == _losses(fresh)
        SETTINGS.use_bias_shift, SETTINGS.table["scale"] = False, 1.0
        loaded, _ = _make(tmp_path, nn.Tanh())
        _losses(loaded)
        assert loaded.stats().cache_loads == 1  # unchanged settings: the stored plan is used
    finally:
        SETTINGS.use_bias_shift, SETTINGS.table["scale"] = False, 1.0


def test_a_kernel_module_made_while_tracing_is_no_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # relu of more than SELECT_MIN elements runs an eager kernel, whose module is made (its
    # ``numba.njit`` line run) the first time it is needed: here inside the trace. That module is
    # dualflow's, not an environment the plan depends on; a new process does not have it loaded
    x = dualflow.tensor(np.random.default_rng(1).normal(size=(97, 89)))  # a shape no test uses
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path / "root"))  # kernels made here stay

    def step(x):
        return ops.relu(x * 2.0) - x

    def forget_kernel_modules() -> None:  # as in a new process (restored after the test)
        monkeypatch.setattr(numba_elementwise, "_MODULES", OrderedDict())
        monkeypatch.setattr(fused_elementwise, "_CACHE", {})
        for name in [n for n in sys.modules if n.startswith(KERNEL_MODULE_PREFIX)]:
            monkeypatch.delitem(sys.modules, name)

    forget_kernel_modules()
    stored = dualflow.compile(step, cache_dir=tmp_path / "plans")
    want = stored(x).numpy()
    assert stored.stats().cache_stores == 1
    np.testing.assert_array_equal(want, step(x).numpy())
    forget_kernel_modules()
    loaded = dualflow.compile(step, cache_dir=tmp_path / "plans")
    np.testing.assert_array_equal(loaded(x).numpy(), want)  # the plan's fused kernel
    assert loaded.stats().cache_loads == 1

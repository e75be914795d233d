"""autocast: the context's rules (nesting, enabled=False, decorator, per device type, backward
in the forward's types, part of a compiled function's cache key) and training under autocast +
GradScaler reaching the float32 loss, eagerly and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
import dualflow.nn.functional as F
from dualflow import nn
from dualflow.amp import GradScaler, autocast, get_autocast_dtype, is_autocast_enabled
from dualflow.errors import DTypeError

F16 = dualflow.float16


def test_nesting_disabling_and_decorator() -> None:
    a = dualflow.ones(2, 2)
    with autocast("cpu", dtype=F16):
        assert (a @ a).dtype == F16 and is_autocast_enabled("cpu")
        assert not is_autocast_enabled("cuda")
        with autocast("cpu", enabled=False):
            assert (a @ a).dtype == np.float32
        assert get_autocast_dtype("cpu") == F16
    assert (a @ a).dtype == np.float32 and dualflow.config.autocast is None

    @autocast("cpu", dtype="half")
    def f(x):
        return x @ x

    assert f(a).dtype == F16
    assert (dualflow.ones(2, 2, dtype="float64") @ a.double()).dtype == np.float64


def test_matrix_products_of_mixed_floats_follow_pytorchs_lists() -> None:
    low, f32 = dualflow.ones(2, 2, dtype=F16), dualflow.ones(2, 2)
    with pytest.raises(DTypeError, match="matmul: self is float16 but other is float32"):
        low @ f32  # no autocast: PyTorch raises too
    with autocast("cpu", dtype=F16):
        assert (low @ f32).dtype == (f32 @ low).dtype == low.mm(f32).dtype == F16  # listed
        assert f32[0].dot(f32[0]).dtype == f32.mv(f32[0]).dtype == np.float32  # not listed
        with pytest.raises(DTypeError, match="dot: self is float16 but other is float32"):
            low[0].dot(f32[0])
        with pytest.raises(DTypeError, match="float64"):
            f32.double() @ low  # float64 is never cast


def test_bad_arguments_are_typed_errors() -> None:
    with pytest.raises(DTypeError, match="float16 or bfloat16"):
        autocast("cpu", dtype="float32")
    with pytest.raises(ValueError, match="device_type"):
        autocast("tpu", dtype=F16)


def test_backward_runs_in_the_forward_types_and_grads_are_float32() -> None:
    lin = nn.Linear(4, 3)
    x = dualflow.randn(5, 4, requires_grad=True)
    with autocast("cpu", dtype=F16):
        y = lin(x)
        loss = F.cross_entropy(y, dualflow.tensor([0, 1, 2, 0, 1]))
    loss.backward()
    assert y.dtype == F16 and loss.dtype == np.float32
    assert lin.weight.grad.dtype == np.float32 and x.grad.dtype == np.float32
    with autocast("cpu", dtype=F16):  # backward inside the context: the same gradients
        lin2 = nn.Linear(4, 3)
        lin2.load_state_dict(lin.state_dict())
        F.cross_entropy(lin2(x.detach()), dualflow.tensor([0, 1, 2, 0, 1])).backward()
    np.testing.assert_array_equal(lin.weight.grad.numpy(), lin2.weight.grad.numpy())


def test_the_setting_is_part_of_the_compile_cache_key() -> None:
    fn = dualflow.compile(lambda a: a @ a)
    a = dualflow.ones(3, 3)
    assert fn(a).dtype == np.float32
    with autocast("cpu", dtype=F16):
        assert fn(a).dtype == F16
    assert fn(a).dtype == np.float32
    assert fn.stats().traces == 2 and "config.autocast" in fn.stats().retrace_reasons[-1]


def _data(kind: str) -> tuple:
    rng = np.random.default_rng(0)
    shape = (64, 12) if kind == "mlp" else (32, 1, 8, 8)
    x = rng.normal(size=shape).astype(np.float32)
    w = rng.normal(size=(int(np.prod(shape[1:])), 3))
    labels = (x.reshape(shape[0], -1) @ w).argmax(1)
    flip = rng.random(shape[0]) < 0.2  # some noisy labels
    labels[flip] = rng.integers(0, 3, flip.sum())
    return dualflow.tensor(x), dualflow.tensor(labels.astype(np.int64))


def _model(kind: str) -> nn.Module:
    dualflow.manual_seed(0)
    if kind == "mlp":
        return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64, 3),
    )  # fmt: skip


def _train(kind: str, amp: bool, compiled: bool, steps: int) -> list[float]:
    model = _model(kind)
    opt = dualflow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = GradScaler(init_scale=2.0**12, enabled=amp)
    x, labels = _data(kind)

    def step(x, labels):
        opt.zero_grad()
        with autocast("cpu", dtype=F16, enabled=amp):
            loss = F.cross_entropy(model(x), labels)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    fn = dualflow.compile(step) if compiled else step
    return [fn(x, labels).item() for _ in range(steps)]


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_200_steps_under_autocast_reach_the_float32_loss(kind: str) -> None:
    full = _train(kind, amp=False, compiled=False, steps=200)
    half = _train(kind, amp=True, compiled=False, steps=200)
    assert full[-1] < 0.7 * full[0]  # it learned something
    assert abs(half[-1] - full[-1]) <= 0.02 * full[-1], (half[-1], full[-1])


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_compiled_autocast_training_equals_eager(kind: str) -> None:
    eager = _train(kind, amp=True, compiled=False, steps=6)
    compiled = _train(kind, amp=True, compiled=True, steps=6)
    np.testing.assert_allclose(compiled, eager, rtol=1e-6)

"""functional_call: the given tensors are used, the module's own come back (even on error),
tied weights follow, bad names are typed errors; compiled equals eager."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import dualflow
from dualflow import func, nn


def _model() -> nn.Module:
    dualflow.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 2)).double()


def _new_params(model: nn.Module, scale: float) -> dict:
    return {k: (v.detach() * scale + 0.1) for k, v in model.named_parameters()}


def test_uses_given_tensors_and_restores() -> None:
    model = _model().eval()
    before = {k: v for k, v in model.state_dict().items()}
    own = {k: id(v) for k, v in model.named_parameters()}
    x = dualflow.tensor(np.random.default_rng(0).normal(size=(5, 3)))
    params = _new_params(model, 2.0)
    got = func.functional_call(model, params, (x,))
    clone = _model().eval()
    with dualflow.no_grad():
        for k, v in clone.named_parameters():
            v.copy_(params[k])
    np.testing.assert_allclose(got.numpy(), clone(x).numpy(), rtol=1e-12)
    assert {k: id(v) for k, v in model.named_parameters()} == own
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k].numpy())


def test_buffers_and_list_of_dicts() -> None:
    model = _model().eval()
    x = dualflow.tensor(np.ones((2, 3)))
    buffers = {"1.running_mean": dualflow.tensor(np.full(4, 5.0))}
    shifted = func.functional_call(model, [{}, buffers], x)
    plain = model(x)
    assert not np.allclose(shifted.numpy(), plain.numpy())
    np.testing.assert_array_equal(model[1].running_mean.numpy(), np.zeros(4))


def test_restored_after_an_error() -> None:
    model = _model()
    own = model[0].weight
    with pytest.raises(dualflow.errors.ShapeError):
        func.functional_call(
            model, {"0.weight": dualflow.ones(4, 7).double()}, dualflow.ones(2, 3).double()
        )
    assert model[0].weight is own


def test_unknown_missing_and_non_tensor_names() -> None:
    model = _model()
    with pytest.raises(KeyError, match="no parameter or buffer"):
        func.functional_call(model, {"0.wieght": dualflow.ones(4, 3)}, dualflow.ones(1, 3))
    with pytest.raises(KeyError, match="strict"):
        func.functional_call(model, {}, dualflow.ones(1, 3), strict=True)
    with pytest.raises(TypeError, match="must be a Tensor"):
        func.functional_call(model, {"0.bias": np.zeros(4)}, dualflow.ones(1, 3))


def test_tied_weights_follow() -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(2, 2, bias=False)
            self.b = nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x: dualflow.Tensor) -> dualflow.Tensor:
            return self.b(self.a(x))

    model, x = Tied(), dualflow.ones(1, 2)
    w = dualflow.tensor([[2.0, 0.0], [0.0, 3.0]])
    assert func.functional_call(model, {"a.weight": w}, x).tolist() == [[4.0, 9.0]]
    untied = func.functional_call(model, {"a.weight": w}, x, tie_weights=False)
    assert not np.allclose(untied.numpy(), [[4.0, 9.0]])


def test_nested_and_threaded_calls_restore() -> None:
    model = _model().eval()
    own = model[0].weight
    x = dualflow.ones(3, 3).double()
    inner = _new_params(model, 3.0)
    outer = _new_params(model, 2.0)

    class Wrap(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, x: dualflow.Tensor) -> dualflow.Tensor:
            return func.functional_call(model, inner, x) + self.m(x)

    wrapped = {f"m.{k}": v for k, v in outer.items()}
    got = func.functional_call(Wrap(), wrapped, x)
    want = func.functional_call(model, inner, x) + func.functional_call(model, outer, x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    results: list = []
    threads = [
        threading.Thread(target=lambda: results.append(func.functional_call(model, outer, x)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_allclose(r.numpy(), results[0].numpy())
    assert model[0].weight is own


def test_compiled_grad_of_functional_call_equals_eager() -> None:
    model = _model().eval()
    x = dualflow.tensor(np.random.default_rng(1).normal(size=(5, 3)))

    def loss_grad(params: dict, x: dualflow.Tensor) -> dict:
        return func.grad(lambda p: (func.functional_call(model, p, x) ** 2).sum())(params)

    compiled = dualflow.compile(loss_grad, fallback="error")
    for scale in (1.0, 2.0, 3.0):
        params = _new_params(model, scale)
        want = loss_grad(params, x)
        got = compiled(params, x)
        assert list(got) == list(want)
        for k in want:
            np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-12)
    assert compiled.stats().traces == 1
    assert all(p.grad is None for p in model.parameters())

"""Module hooks (PyTorch's semantics; the values themselves are checked against PyTorch in
tests/compat): order, return values, removal, and compiled == eager, retracing on changes."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops
from dualflow.errors import TracingError
from tests.nn.compiled import assert_compiled_equals_eager, train

X = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)


def hooked() -> nn.Module:
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    net[0].register_forward_hook(lambda m, args, out: out * 2.0)
    net[2].register_forward_pre_hook(lambda m, args: (args[0] + 1.0,))
    net[1].register_full_backward_hook(lambda m, gin, gout: (gin[0] * 0.5,))
    net[2].register_full_backward_pre_hook(lambda m, gout: (gout[0] * 3.0,))
    return net


def plain() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def test_hooks_compiled_equal_eager_and_change_the_result() -> None:
    assert_compiled_equals_eager(hooked, [X])
    with_hooks, _, _ = train(hooked, [X], compiled=False)
    without, _, _ = train(plain, [X], compiled=False)
    assert not np.allclose(with_hooks, without)


def test_hook_order_prepend_kwargs_and_removal() -> None:
    layer, calls = nn.Identity(), []
    first = layer.register_forward_hook(lambda m, a, out: calls.append("first"))
    layer.register_forward_hook(lambda m, a, out: calls.append("prepended"), prepend=True)
    layer.register_forward_pre_hook(lambda m, args, kwargs: (args, {**kwargs}), with_kwargs=True)
    layer(dualflow.tensor([1.0]))
    assert calls == ["prepended", "first"]
    first.remove()
    first.remove()  # a second remove is a no-op, as PyTorch
    calls.clear()
    layer(dualflow.tensor([1.0]))
    assert calls == ["prepended"]
    with layer.register_forward_hook(lambda m, a, out: out + 1):
        assert layer(dualflow.tensor([1.0])).tolist() == [2.0]
    assert layer(dualflow.tensor([1.0])).tolist() == [1.0]


def test_always_call_hook_runs_when_forward_raises() -> None:
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    seen = []
    module = Broken()
    module.register_forward_hook(lambda m, a, out: seen.append(out), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        module(1.0)
    assert seen == [None]


def test_backward_hook_sees_grad_input_and_grad_output() -> None:
    layer, seen = nn.Linear(3, 2), {}

    def hook(module, grad_input, grad_output):
        seen["in"], seen["out"] = grad_input, grad_output

    layer.register_full_backward_hook(hook)
    x = dualflow.tensor(X, requires_grad=True)
    y = layer(x)
    ops.sum(y * 2.0).backward()
    np.testing.assert_allclose(seen["out"][0].numpy(), np.full((4, 2), 2.0))
    np.testing.assert_allclose(seen["in"][0].numpy(), x.grad.numpy())


def test_backward_hook_without_input_grad_fires_at_the_outputs() -> None:
    layer, seen = nn.Linear(3, 2), []
    layer.register_full_backward_hook(lambda m, gin, gout: seen.append((gin, gout)))
    ops.sum(layer(X)).backward()  # X does not require grad
    ((gin, gout),) = seen
    assert gin == (None,) and gout[0].shape == (4, 2)
    assert layer.weight.grad is not None


def test_hooks_cannot_change_inside_a_compiled_function() -> None:
    layer = nn.Linear(3, 2)
    handle = layer.register_forward_hook(lambda m, a, out: out)

    @dualflow.compile(fallback="error")
    def register(x):
        layer.register_forward_hook(lambda m, a, out: out)
        return layer(x)

    @dualflow.compile(fallback="error")
    def remove(x):
        handle.remove()
        return layer(x)

    for fn in (register, remove):
        with pytest.raises(TracingError, match="hook"):
            fn(dualflow.tensor(X))
    assert len(layer._forward_hooks) == 1


def test_registering_a_hook_retraces_a_compiled_call() -> None:
    layer = nn.Linear(3, 2)
    f = dualflow.compile(lambda x: layer(x))
    x = dualflow.tensor(X)
    before = f(x).numpy()
    f(x)
    handle = layer.register_forward_hook(lambda m, a, out: out * 3.0)
    np.testing.assert_allclose(f(x).numpy(), before * 3.0, rtol=1e-6)
    handle.remove()
    np.testing.assert_allclose(f(x).numpy(), before, rtol=1e-6)
    assert f.stats().traces >= 2 and f.stats().eager_fallbacks == 0


def test_backward_hook_through_a_compiled_model_called_from_outside() -> None:
    def run(compiled: bool) -> list:
        dualflow.random.seed(0)
        net = plain()
        net[1].register_full_backward_hook(lambda m, gin, gout: (gin[0] * 0.5,))
        f = dualflow.compile(net) if compiled else net
        x = dualflow.tensor(X, requires_grad=True)
        grads = []
        for _ in range(3):  # the forward is a plan; its backward graph holds the hook's ops
            net.zero_grad()
            x.grad = None
            ops.sum(f(x) ** 2).backward()
            grads.append((net[0].weight.grad.numpy().copy(), x.grad.numpy().copy()))
        if compiled:
            assert f.stats().plan_runs == 2
        return grads

    for (w_eager, x_eager), (w, xg) in zip(run(False), run(True)):
        np.testing.assert_allclose(w, w_eager, rtol=1e-6)
        np.testing.assert_allclose(xg, x_eager, rtol=1e-6)

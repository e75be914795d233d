"""A trace keeps no array of its tracing run (issue 36, item 6): every op output the tracing
run computed dies when the trace is finished, except what the caller or the state still holds
(the result, parameters, their ``.grad``, optimizer state). Before, cycles (the tracer's
``hooks = self``, the environment probe's frame closures) kept all of them alive until the
garbage collector ran: 30 MiB for a 20-layer MLP at batch 256.

The collector is off while each test runs, so only reference counting frees anything.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.tensor.raw_fields import unwatched
from dualflow.tracer import user_code
from dualflow.tracer.env_probe import EnvProbe
from dualflow.tracer.interpreter import TracingInterpreter


@pytest.fixture
def outputs(monkeypatch):
    """Weak references to every op output and new tensor of the tracing runs, collector off."""
    made: list[tuple[str, weakref.ref]] = []
    apply = TracingInterpreter.apply

    def recording(self, op, args, attrs):
        result = apply(self, op, args, attrs)
        for tensor in result if isinstance(result, tuple) else (result,):
            made.append((op.name, weakref.ref(unwatched(tensor))))
        return result

    new_tensor = TracingInterpreter.on_new_tensor

    def recording_new(self, tensor):  # tensors the run creates (Tensor(), dualflow.tensor)
        new_tensor(self, tensor)
        made.append(("new tensor", weakref.ref(unwatched(tensor))))

    monkeypatch.setattr(TracingInterpreter, "apply", recording)
    monkeypatch.setattr(TracingInterpreter, "on_new_tensor", recording_new)
    # these hooks run inside the tracer: library code, not user code the probe follows (it
    # would see `made.append(weakref.ref(...))` as the step storing an opaque value)
    monkeypatch.setitem(user_code._USER_FILES, recording.__code__.co_filename, False)
    gc.collect()
    gc.disable()
    try:
        yield made
    finally:
        gc.enable()


def _alive(made: list, keep: list = ()) -> list[str]:
    """The ops whose outputs are still alive, leaving out the arrays of ``keep`` (tensors the
    caller or the state holds) and the arrays they are views of."""
    kept = {id(a) for t in keep for a in (t.raw_array, _root(t.raw_array))}
    found = []
    for name, ref in made:
        array = ref()
        if array is not None and id(array) not in kept and id(_root(array)) not in kept:
            found.append(name)
    return found


def _no_tracer_left() -> bool:
    """No tracing interpreter nor environment probe survives its run (a cycle would hold it)."""
    return not [o for o in gc.get_objects() if type(o) in (TracingInterpreter, EnvProbe)]


def _root(array):
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


def _mlp(layers: int = 4, width: int = 32):
    dualflow.random.seed(0)
    parts = []
    for _ in range(layers):
        parts += [nn.Linear(width, width), nn.ReLU()]
    x = np.random.default_rng(0).normal(size=(16, width)).astype(np.float32)
    return nn.Sequential(*parts), dualflow.tensor(x)


def test_forward_under_no_grad_keeps_no_activation(outputs) -> None:
    model, x = _mlp()
    compiled = dualflow.compile(model)
    with dualflow.no_grad():
        out = compiled(x)
        expected = out.numpy().copy()
        del out
        assert len(outputs) >= 8  # matmul/add/relu of every layer, traced
        assert _alive(outputs) == []
        assert _no_tracer_left()
        again = compiled(x)  # the plan still runs, and gives what the tracing run gave
    assert compiled.stats().plan_runs == 1
    np.testing.assert_allclose(again.numpy(), expected, rtol=1e-6)


def test_outputs_that_require_grad_keep_only_their_own_tape(outputs) -> None:
    model, x = _mlp()
    compiled = dualflow.compile(model)
    out = compiled(x)  # traces the forward and the backward graph of its output
    assert compiled.history[0].backward is not None
    out.sum().backward()
    del out
    params = list(model.parameters())
    assert _alive(outputs, params + [p.grad for p in params]) == []
    assert _no_tracer_left()  # the backward graph's tracer too
    out = compiled(x)  # the plan's outputs still differentiate through the backward plan
    out.sum().backward()
    assert compiled.stats().plan_runs == 1


def _state(model: nn.Module, opt) -> list:
    """Parameters, their gradients and the optimizer's state tensors."""
    tensors = list(model.parameters())
    tensors += [p.grad for p in model.parameters() if p.grad is not None]
    tensors += [t for inner in opt.state.values() for t in inner.values()]
    return [t for t in tensors if isinstance(t, dualflow.Tensor)]


def test_training_step_keeps_only_state(outputs) -> None:
    model, x = _mlp()
    opt = dualflow.optim.Adam(model.parameters(), lr=1e-3)

    @dualflow.compile
    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    for _ in range(2):  # the first trace is single-use (Adam's state is born in it)
        loss = step(x)
        del loss
        assert _alive(outputs, _state(model, opt)) == []
        assert _no_tracer_left()
    assert step.stats().traces == 2
    step(x)
    assert step.stats().plan_runs == 1


def test_a_trace_that_fails_closed_keeps_nothing_either(outputs) -> None:
    model, x = _mlp()

    def peek(x):
        y = model(x)
        y.numpy()  # raw access: the trace is unusable, the call ran eagerly
        return y

    compiled = dualflow.compile(peek)
    with dualflow.no_grad(), pytest.warns(RuntimeWarning, match="from now on"):
        out = compiled(x)
    del out
    assert outputs and _alive(outputs) == []


def test_a_numpy_argument_made_a_tensor_keeps_no_copy(outputs) -> None:
    @dualflow.compile
    def scaled(a):
        return dualflow.tensor(a) * 2  # a cast of the argument: its first copy is dead data

    a = np.ones((64, 64), np.float32)
    out = scaled(a)
    del out
    assert ("new tensor" in [name for name, _ in outputs]) and _alive(outputs) == []
    (trace,) = scaled.history
    assert not trace.source_graph.consts  # explain(passes=True)'s graph keeps none either
    np.testing.assert_array_equal(scaled(a + 1).numpy(), (a + 1) * 2)


def test_a_tracer_something_still_holds_holds_no_array_of_its_run(outputs, monkeypatch) -> None:
    held = []
    init = TracingInterpreter.__init__

    def holding(self, *args, **kwargs):
        init(self, *args, **kwargs)
        held.append(self)  # as a cycle or a debugger would (before the run: not traced)

    monkeypatch.setattr(TracingInterpreter, "__init__", holding)
    model, x = _mlp()
    opt = dualflow.optim.SGD(model.parameters(), lr=0.1)

    @dualflow.compile
    def step(x):
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        opt.step()

    step(x)
    assert held and step.history  # a trace was made, its tracer is still referenced
    assert _alive(outputs, _state(model, opt)) == []
    assert not held[0].backups  # nor the copies of the parameters a rollback would restore

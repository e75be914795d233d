"""One trace for every size: dynamic dimensions, their guards and their witness (issue 39)."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow as df
from dualflow import nn

SIZES = [8, 12, 16, 5, 33, 8, 12]


def _mlp_run(sizes: list[int], compiled: bool, **options) -> tuple[list[float], list, object]:
    df.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
    opt = df.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = df.compile(step, **options) if compiled else step
    rng = np.random.default_rng(1)
    losses = []
    for n in sizes:
        x = df.tensor(rng.standard_normal((n, 20)).astype(np.float32))
        y = df.tensor(rng.integers(0, 5, n))
        losses.append(float(fn(x, y)))
    return losses, [p.numpy().copy() for p in model.parameters()], fn


@pytest.mark.parametrize("passes", ["exact", None])
def test_mlp_step_over_batch_sizes_is_eager_with_two_traces(passes) -> None:
    eager, eager_params, _ = _mlp_run(SIZES, False)
    losses, params, fn = _mlp_run(SIZES, True, passes=passes)
    assert losses == eager
    for p, q in zip(params, eager_params):
        np.testing.assert_array_equal(p, q)
    stats = fn.stats()
    assert stats.traces <= 3  # the first call's momentum buffers: one single-use trace
    assert stats.plan_runs >= len(SIZES) - 3
    assert stats.eager_fallbacks == 0


def test_dynamic_false_traces_every_size_and_true_from_the_first_call() -> None:
    static = _mlp_run([6, 7, 9, 11], True, dynamic=False)[2].stats()
    assert static.traces == 4  # one per size
    dynamic = _mlp_run([6, 7, 9, 11, 13], True, dynamic=True)[2].stats()
    assert dynamic.traces <= 3 and dynamic.plan_runs >= 2


def test_python_branch_on_a_size_guards_the_comparison() -> None:
    def f(x):
        if x.shape[0] > 8:
            return (x * 2).sum(0) / x.shape[0]
        return x.reshape(x.shape[0] * 2, -1).mean() + df.arange(x.shape[0]).sum()

    g = df.compile(f, passes="exact")
    rng = np.random.default_rng(0)
    for n in [4, 6, 10, 12, 5, 7, 20, 3]:
        x = df.tensor(rng.standard_normal((n, 6)).astype(np.float32))
        np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())
    assert g.stats().traces <= 4
    assert g.stats().plan_runs >= 4


def test_a_size_read_behind_the_symbols_back_is_caught_by_the_witness() -> None:
    # library code the tracer does not watch (dualflow's own: its raw-field reads are not
    # reported) that divides by a raw shape: a plain int the trace cannot see
    source = "def f(x):\n    return x.sum() / x.raw_array.shape[0]\n"
    namespace: dict = {}
    exec(compile(source, "<dualflow library code>", "exec"), namespace)
    f = namespace["f"]
    g = df.compile(f, passes="exact")
    for n in [4, 6, 10, 12]:
        x = df.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3))
        assert g(x).item() == f(x).item()
    assert any(family.refuted for family in g.dynamic.families.values())


def test_size_zero_is_a_constant_and_size_one_is_served_where_nothing_changes() -> None:
    def f(x):
        return x - x.mean(0)

    g = df.compile(f)
    for n in [4, 6, 1, 9, 1, 0, 3]:
        x = df.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2))
        np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())
    # 4, 6 (dynamic, witnessed by 4), and 0: no decision of the trace took the rows >= 2, so
    # the template serves 1 too (PyTorch specializes 1 always)
    assert g.stats().traces == 3
    assert g.stats().retrace_reasons[-1].endswith("-> 0")


@pytest.mark.parametrize("passes", ["exact", None])
def test_a_training_step_serves_batch_one_from_its_template(passes) -> None:
    sizes = [8, 12, 5, 1, 7, 1]
    eager, eager_params, _ = _mlp_run(sizes, False)
    losses, params, fn = _mlp_run(sizes, True, passes=passes)
    assert losses == eager
    for p, q in zip(params, eager_params):
        np.testing.assert_array_equal(p, q)
    assert fn.stats().traces == 3  # momentum's single-use first step, 12, and the witness 5


@pytest.mark.parametrize(
    "f",
    [
        lambda x: x.squeeze(0) * 2,  # squeezing a dimension that may be 1
        lambda x: x.squeeze() * 2,
        lambda x: x.sum(0) * 2 if x.shape[0] != 1 else x[0],  # a Python branch
        # training batch norm needs two rows: eager refuses one
        lambda x: nn.functional.batch_norm(x, None, None, training=True),
    ],
)
def test_size_one_is_traced_where_a_decision_took_the_size_ge_2(f) -> None:
    g = df.compile(f, passes="exact")
    for n in [4, 6, 1, 4, 1]:
        x = df.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3) + 1)
        try:
            want = f(x).numpy()
        except Exception as exc:  # eager refuses: so must the compiled call
            with pytest.raises(type(exc)):
                g(x)
            continue
        np.testing.assert_array_equal(g(x).numpy(), want)
    templates = [t for fam in g.dynamic.families.values() for t in fam.templates]
    assert templates and all(t.failing_guard({"s0": 1}) is not None for t in templates)


def test_mark_dynamic_and_mark_static() -> None:
    g = df.compile(lambda x: x * 2)
    x = df.zeros(4, 3)
    df.mark_dynamic(x, 0)
    g(x)
    g(df.zeros(5, 3))
    g(df.zeros(6, 3))
    assert g.stats().traces == 2
    h = df.compile(lambda x: x * 2)
    for n in [4, 5, 6]:
        y = df.zeros(n, 3)
        df.mark_static(y, 0)
        h(y)
    assert h.stats().traces == 3
    with pytest.raises(df.errors.ConfigError):
        df.mark_dynamic(x, 2)
    with pytest.raises(df.errors.ConfigError):
        df.compile(lambda x: x, dynamic="yes")


def test_a_returned_size_in_any_container_is_the_call_s_own() -> None:
    from collections import namedtuple

    Result = namedtuple("Result", "total rows")

    def f(x):
        return Result(x.sum(), {"n": [x.shape[0]]})

    g = df.compile(f)
    for n in [4, 6, 9, 4, 6, 9]:
        out = g(df.zeros(n, 2))
        assert type(out) is Result and out.rows == {"n": [n]} and type(out.rows["n"][0]) is int


def test_a_dynamic_dimension_traced_at_size_one_stays_that_size() -> None:
    # z's rows changed between the first calls (so its dimension is masked out of the family's
    # signature) but the template traced it at 1: a call with 3 rows needs a trace of its own
    def f(x, z):
        return x.sum() + z.sum(0).sum() * len(z)

    g = df.compile(f, passes="exact")
    for n, m in [(1, 3), (2, 1), (3, 1), (2, 3)]:
        x, z = df.ones(n, 2), df.ones(m, 2)
        assert g(x, z).item() == f(x, z).item()


def test_a_branch_on_a_numpy_argument_s_size_is_guarded() -> None:
    # a numpy-array argument's shape is read like a tensor's: with dynamic dimensions its sizes
    # are expressions, so the branch guards the comparison (it was the traced call's int,
    # unguarded: a template traced at 6 served 10 with the other branch)
    def f(x, w):
        t = df.tensor(w)
        return t.exp().sum() if w.shape[0] > 8 else t.sin().cos().sum() + w.shape[0]

    g = df.compile(f, passes="exact")
    for n in [4, 6, 10, 12, 5, 9, 7]:
        w = np.linspace(0, 1, n * 2, dtype=np.float32).reshape(n, 2)
        x = df.zeros(1)
        assert g(x, w).item() == f(x, w).item(), n
    assert g.stats().plan_runs >= 2


def test_backward_outside_a_call_traced_with_dynamic_sizes_equals_eager() -> None:
    # the traced call's outputs carry its tape, whose attributes and shapes were expressions:
    # a backward run outside the compiled function must give eager's gradients
    def make():
        df.manual_seed(3)
        return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2))

    eager_model, model = make(), make()
    g = df.compile(lambda x: model(x).reshape(x.shape[0] * 2).mean())
    rng = np.random.default_rng(0)
    for n in [3, 5, 8, 6]:
        x = rng.standard_normal((n, 6)).astype(np.float32)
        g(df.tensor(x)).backward()
        eager_model(df.tensor(x)).reshape(n * 2).mean().backward()
    for p, q in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_a_template_that_cannot_be_rebuilt_traces_the_call(monkeypatch) -> None:
    # every guard held but an op refuses the new sizes: the call is traced (and equals eager)
    from dualflow.tracer import shape_template

    def f(x):
        return (x * 2).sum(0)

    g = df.compile(f, passes="exact")
    for n in [4, 6]:
        g(df.ones(n, 3))
    real = shape_template.instantiate

    def refusing(graph, facts, binding):
        if 9 in binding.values():
            raise df.errors.ShapeError("refused")
        return real(graph, facts, binding)

    monkeypatch.setattr(shape_template, "instantiate", refusing)
    x = df.tensor(np.arange(27, dtype=np.float32).reshape(9, 3))
    np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())
    assert g.stats().traces == 3


def test_a_first_trace_at_size_one_that_differs_stops_only_size_one() -> None:
    # library code the tracer does not watch branches on a raw size being 1: the real trace at
    # 1 differs from the template rebuilt for 1, so the template stops serving 1 (the other
    # sizes stand: it is no refutation)
    source = "def f(x):\n    return x * 2 if x.raw_array.shape[0] != 1 else x * 3\n"
    namespace: dict = {}
    exec(compile(source, "<dualflow library code>", "exec"), namespace)
    f = namespace["f"]
    g = df.compile(f, passes="exact")
    for n in [1, 4, 6, 1, 9, 5]:
        x = df.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2))
        np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())
    assert not any(family.refuted for family in g.dynamic.families.values())
    templates = [t for fam in g.dynamic.families.values() for t in fam.templates]
    assert templates and all(t.failing_guard({"s0": 1}) is not None for t in templates)
    assert g.stats().traces == 3 and g.stats().plan_runs == 3


def test_sizes_pass_isinstance_int_as_in_eager() -> None:
    # chunk() gave split() a size, which took it for a list of sections (TypeError); code
    # that checks isinstance(n, int) takes eager's branch
    def f(x):
        n = x.shape[0]
        kind = 1.0 if isinstance(n, int) and not isinstance(n, bool) else -1.0
        return sum(p.sum() for p in x.chunk(2)) * kind

    g = df.compile(f, passes="exact")
    for n in [4, 6, 10, 7]:
        x = df.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3))
        assert g(x).item() == f(x).item()


def test_batch_norm_training_over_batch_sizes_keeps_running_stats_exact() -> None:
    # the running variance's unbiasing ``momentum * n / (n - 1)`` is a float computed from a
    # size: replayed per call as Python computes it (it took the traced call's value, guarded,
    # and the trace failed closed)
    def run(compiled):
        df.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        step = df.compile(lambda x: model(x).mean(), passes="exact") if compiled else None
        outs = []
        for b, h in [(2, 8), (3, 8), (5, 6), (4, 10), (3, 8)]:
            x = df.tensor(np.linspace(-1, 1, b * 3 * h * h, dtype=np.float32).reshape(b, 3, h, h))
            outs.append((step or (lambda v: model(v).mean()))(x).item())
        return outs, [b.numpy().copy() for b in model.buffers()], step

    eager, eager_buffers, _ = run(False)
    compiled, buffers, step = run(True)
    assert compiled == eager
    for got, want in zip(buffers, eager_buffers):
        np.testing.assert_array_equal(got, want)
    assert step.stats().traces <= 3 and step.stats().eager_fallbacks == 0


def test_dropout_in_training_serves_every_batch_size() -> None:
    # random ops checked their shape with int(): every size was a trace of its own
    def f(x):
        return nn.functional.dropout(x, 0.5, training=True).sum(0)

    g = df.compile(f, dynamic=True, passes="exact")
    for n in [4, 6, 9, 1, 12, 7]:
        x = df.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3))
        df.manual_seed(n)
        got = g(x).numpy()
        df.manual_seed(n)
        np.testing.assert_array_equal(got, f(x).numpy())
    assert g.stats().traces == 2 and g.stats().plan_runs == 4

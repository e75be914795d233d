"""Lazy re-execution (issue 35): a compiled function the fast path cannot serve runs its Python at
every call with its ops as cached plans, and every call equals the eager one — results, state
written, Python side effects — including graph breaks (``print``, ``.item()``, ``.numpy()``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualflow as df
from dualflow import nn, ops
from dualflow.tracer.lazy_choice import LazyOrEager


@pytest.fixture(autouse=True)
def _lazy_at_every_call(monkeypatch):
    # these tests check the lazy path itself; which path a call takes off the fast path is
    # measured (lazy_choice) and tested in test_lazy_choice.py
    monkeypatch.setattr(LazyOrEager, "WARM_CALLS", 10**9)


def _model(seed: int = 0, dropout: float = 0.2):
    df.manual_seed(seed)
    m = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(dropout), nn.Linear(12, 3))
    return m, df.optim.Adam(m.parameters(), lr=1e-2)


def _batches(n: int = 8):
    rng = np.random.default_rng(1)
    xs = [df.tensor(rng.standard_normal((5, 6)).astype("float32")) for _ in range(n)]
    ys = [df.tensor(rng.integers(0, 3, 5)) for _ in range(n)]
    return list(zip(xs, ys))


def _both(step, make=_model, **compile_options):
    """Run ``step`` eagerly and compiled on twin models; return both runs' results."""
    runs = []
    for compiled in (False, True):
        model, opt = make()
        fn = df.compile(step, **compile_options) if compiled else step
        log: list = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out = [fn(model, opt, x, y, log).item() for x, y in _batches()]
        runs.append((out, log, [p.numpy().copy() for p in model.parameters()], fn))
    return runs


def _assert_equal(runs) -> None:
    (a, log_a, params_a, _), (b, log_b, params_b, _) = runs
    assert a == b and log_a == log_b
    for pa, pb in zip(params_a, params_b):
        np.testing.assert_array_equal(pa, pb)


def test_print_inside_a_step_runs_plans_and_equals_eager(capsys):
    def step(m, opt, x, y, log):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        print("loss", loss)
        return loss

    runs = _both(step)
    _assert_equal(runs)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 * len(_batches())  # every call printed, as eager does
    stats = runs[1][3].stats()
    assert stats.lazy_calls >= len(_batches()) - 1
    assert stats.lazy_plan_segments >= stats.lazy_calls - 2  # plans from the second sighting
    assert "lazy re-execution" in str(df.explain(runs[1][3]))


def test_a_data_dependent_branch_whose_outcome_changes():
    def step(m, opt, x, y, log):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        if loss.item() > 1.1:  # a graph break: the rest is recorded in a second segment
            opt.step()
        log.append(float(loss))
        return loss

    runs = _both(step, lazy="always")
    _assert_equal(runs)
    stats = runs[1][3].stats()
    # a break a call at least: at .item(), or earlier where an op reading the labels (which may
    # raise on them) ran at its line and computed the loss on the way
    assert stats.graph_breaks >= len(_batches()) and stats.traces == 0


def test_numpy_round_trip_in_the_middle_of_a_step():
    def step(m, opt, x, y, log):
        opt.zero_grad()
        h = m[0](x)
        scaled = df.tensor(np.tanh(h.detach().numpy()) * 2.0)  # numpy in the middle
        loss = nn.functional.cross_entropy(m[3](m[1](h) + scaled), y)
        loss.backward()
        opt.step()
        return loss

    _assert_equal(_both(step, lazy="always"))


def test_configuration_read_through_code_no_model_follows():
    class Cfg:
        def __init__(self, lr: float) -> None:
            self.lr = lr

    configs = [Cfg(0.1), Cfg(0.2)]

    def step(m, opt, x, y, log):
        lr = max(configs, key=lambda c: c.lr).lr  # a C function picking an object
        loss = nn.functional.cross_entropy(m(x), y)
        for p in m.parameters():
            p.grad = None
        loss.backward()
        with df.no_grad():
            for p in m.parameters():
                ops.assign(p, p - lr * p.grad)
        configs[1].lr *= 0.9  # changes between calls
        return loss

    def make():
        configs[1].lr = 0.2  # each run starts from the same configuration
        return _model()

    _assert_equal(_both(step, make, lazy="always"))


def test_returned_tensor_keeps_its_autograd_history():
    """The DCGAN pattern: backward inside, and the returned tensor still trains its producer."""
    df.manual_seed(0)
    gen, disc = nn.Linear(4, 4), nn.Linear(4, 1)

    def d_step(z):
        fake = gen(z)
        loss = disc(fake.detach()).sum()
        loss.backward()
        return fake

    compiled = df.compile(d_step, lazy="always")
    z = df.tensor(np.ones((2, 4), "float32"))
    for fn in (d_step, compiled):
        gen.weight.grad = None
        fake = fn(z)
        assert fake.requires_grad
        fake.sum().backward()
        assert gen.weight.grad is not None
    eager_grad = gen.weight.grad.numpy().copy()
    gen.weight.grad = None
    d_step(z).sum().backward()
    np.testing.assert_array_equal(gen.weight.grad.numpy(), eager_grad)


def test_an_error_after_a_break_leaves_state_untouched():
    w = df.tensor([1.0, 2.0])

    def step(x):
        ops.assign(w, w * x)
        if w.sum().item() > 0:  # a break: the write above is committed here
            ops.assign(w, w + 1)
        raise ValueError("bad batch")

    compiled = df.compile(step, lazy="always")
    with pytest.raises(ValueError, match="bad batch"):
        compiled(3.0)
    assert w.tolist() == [1.0, 2.0]


def test_a_view_read_after_its_base_is_written():
    def step(x):
        a = x * 2.0
        v = a[1:]  # a view of a
        ops.assign(a, a + 10.0)  # eager: v sees the write
        return v * 1.0, a

    compiled = df.compile(step, lazy="always")
    for k in range(3):
        x = df.tensor(np.arange(4.0) + k)
        for got, want in zip(compiled(x), step(x)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_writes_to_outside_state_are_seen_by_reads_in_python():
    w = df.tensor([1.0, 2.0])
    seen: list = []

    def step():
        ops.assign(w, w * 3.0)
        seen.append(w.tolist())  # a read of written state: computed first
        return w.sum()

    compiled = df.compile(step, lazy="always")
    for _ in range(3):
        compiled()
    assert seen == [[3.0, 6.0], [9.0, 18.0], [27.0, 54.0]]


def test_lazy_false_keeps_the_eager_fallback():
    def step(x):
        y = x * 2
        print(y)
        return y

    compiled = df.compile(step, lazy=False)
    with pytest.warns(RuntimeWarning, match="runs eagerly"):
        compiled(df.tensor([1.0]))
    compiled(df.tensor([2.0]))
    assert compiled.stats().lazy_calls == 0 and compiled.stats().eager_fallbacks == 2


def test_a_bad_lazy_setting_is_a_config_error():
    with pytest.raises(df.errors.ConfigError, match="lazy"):
        df.compile(lazy="sometimes")


def test_literals_that_compare_equal_are_different_programs():
    # 0.0 == -0.0 and 1 == 1.0 == True: a key that compared them as equal would reuse a plan
    # with the other constant baked in (x / -0.0 is -inf where x / 0.0 is inf)
    compiled = df.compile(lambda x, c: x / c, lazy="always")
    x = df.tensor([1.0, 2.0])
    for c in (0.0, 0.0, -0.0, -0.0, 0.0, 2, 2.0, True):
        got = compiled(x, c)
        np.testing.assert_array_equal(got.numpy(), (x / c).numpy())
        assert got.dtype == (x / c).dtype


def test_a_masked_loss_compiles_with_a_break_around_the_mask():
    """Issue 40's boolean-mask index: its result's shape depends on values, so the fast path
    gives up; lazy re-execution runs the mask eagerly between two planned segments."""

    def step(m, opt, x, y, log):
        opt.zero_grad()
        out = m(x)
        keep = y != 1  # a boolean mask
        loss = nn.functional.cross_entropy(out[keep], y[keep])
        loss.backward()
        opt.step()
        return loss

    runs = _both(step)
    _assert_equal(runs)
    stats = runs[1][3].stats()
    assert stats.lazy_plan_segments >= stats.lazy_calls  # a plan ran in (almost) every call


@pytest.mark.parametrize("lazy", [False, "always"], ids=["eager", "lazy"])
def test_load_state_dict_inside_a_step_is_a_state_write(lazy):
    """``load_state_dict`` writes parameters in place; lazily, a read recorded before it must
    see the old weights, one after it the loaded ones; and a call that fails after it must
    leave the weights as they were (eager runs and lazy runs keep the same promise)."""
    df.manual_seed(0)
    lin = nn.Linear(3, 2)
    saved = {k: v.numpy() * 0 + 0.5 for k, v in lin.state_dict().items()}
    original = {k: v.numpy().copy() for k, v in lin.state_dict().items()}

    def step(x, fail=False):
        before = lin(x).sum()
        lin.load_state_dict(saved)
        after = lin(x).sum()
        if fail:
            raise ValueError("bad batch")
        return before, after

    x = df.tensor(np.ones((4, 3), "float32"))
    want = [t.item() for t in step(x)]
    lin.load_state_dict(original)
    compiled = df.compile(step, lazy=lazy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(3):
            lin.load_state_dict(original)
            assert [t.item() for t in compiled(x)] == want
        lin.load_state_dict(original)
        with pytest.raises(ValueError, match="bad batch"):
            compiled(x, True)
    for key, value in lin.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), original[key])


def test_a_numpy_function_of_a_tensor_sees_writes_recorded_before_it():
    w = df.tensor([1.0, 2.0])
    seen: list = []

    def step():
        ops.assign(w, w * 3.0)  # recorded, not yet done
        seen.append(float(np.median(w)))  # a numpy function dualflow has no op for: data
        return w.sum()

    compiled = df.compile(step, lazy="always")
    for _ in range(3):
        compiled()
    assert seen == [4.5, 13.5, 40.5]


def test_any_reader_of_a_written_tensor_waits_for_the_write():
    """Closing the class of the stale read above: until the flush commits a recorded write, the
    written tensor holds a stand-in for its memory, so even code that reads ``_array`` itself
    (library code, not the Tensor API) gets the written values; afterwards its array is back."""
    w = df.tensor([1.0, 2.0])
    array = w.raw_array
    seen: list = []

    def step():
        ops.assign(w, w * 3.0)
        seen.append(float(w.raw_array.sum()))  # a raw read, as internal helpers do
        ops.assign(w, w + 1.0)  # written again in the next segment
        return w.sum()

    compiled = df.compile(step, lazy="always")
    results = [compiled().item() for _ in range(3)]
    assert seen == [9.0, 33.0, 105.0] and results == [11.0, 35.0, 107.0]
    assert w.raw_array is array and isinstance(w.raw_array, np.ndarray)

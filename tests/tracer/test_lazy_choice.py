"""Off the fast path, lazy re-execution or eager calls: the faster by measurement, same results."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.tracer.lazy_choice import EAGER, LAZY, LazyOrEager


class Clock:
    """A clock the two paths advance by their own cost per call."""

    def __init__(self) -> None:
        self.now = 0.0

    def path(self, name: str, cost: list[float]) -> object:
        def run() -> str:
            self.now += cost[0]
            return name

        return run


def _chooser(lazy_cost: list[float], eager_cost: list[float], compiling=lambda: False):
    choice = LazyOrEager(measured=True)
    clock = Clock()
    choice.clock = lambda: clock.now
    lazily, eagerly = clock.path(LAZY, lazy_cost), clock.path(EAGER, eager_cost)
    return choice, lambda: choice.call(lazily, eagerly, compiling)


def test_eager_serves_once_it_measures_faster() -> None:
    choice, call = _chooser([2.0], [1.0])
    paths = [call() for _ in range(2 + 4 * LazyOrEager.PROBES + 10)]
    warm, probe, after = paths[:2], paths[2 : 2 + 4 * LazyOrEager.PROBES], paths[-10:]
    assert warm == [LAZY, LAZY] and probe == [EAGER, EAGER, LAZY, LAZY] * LazyOrEager.PROBES
    assert after == [EAGER] * 10 and choice.chosen == EAGER
    assert choice.eager_calls == 2 * LazyOrEager.PROBES + 10
    assert "runs eager" in choice.describe()


def test_a_probe_ends_on_the_chosen_path() -> None:
    # the calls after a probe most likely take the chosen path: the probe's last pairs are
    # that path's, so its return from the other path is paid inside the probe
    choice, call = _chooser([2.0], [1.0])
    for _ in range(2 + 4 * LazyOrEager.PROBES + LazyOrEager.FIRST_HOLD):
        call()
    assert choice.chosen == EAGER
    second = [call() for _ in range(4 * LazyOrEager.PROBES)]
    assert second == [LAZY, LAZY, EAGER, EAGER] * LazyOrEager.PROBES
    assert choice.chosen == EAGER and len(choice.decisions) == 2


def test_lazy_stays_when_faster_and_is_asked_again_after_a_doubling_hold() -> None:
    choice, call = _chooser([1.0], [2.0])
    probe, hold = 4 * LazyOrEager.PROBES, LazyOrEager.FIRST_HOLD

    def eager_calls(n: int) -> int:
        return [call() for _ in range(n)].count(EAGER)

    assert eager_calls(2 + probe + hold) == probe // 2  # warm, a probe, then the hold
    assert eager_calls(probe) == probe // 2 and len(choice.decisions) == 2
    assert eager_calls(2 * hold) == 0  # the answer stood: twice the hold
    assert eager_calls(probe) == probe // 2 and choice.chosen == LAZY


def test_a_change_of_costs_is_seen_at_the_next_probe() -> None:
    lazy_cost, eager_cost = [2.0], [1.0]
    choice, call = _chooser(lazy_cost, eager_cost)
    for _ in range(2 + 4 * LazyOrEager.PROBES):
        call()
    assert choice.chosen == EAGER
    lazy_cost[0] = 0.5  # the program's plans became worth it (or the load changed)
    for _ in range(LazyOrEager.FIRST_HOLD + 4 * LazyOrEager.PROBES):
        call()
    assert choice.chosen == LAZY


def test_small_differences_keep_the_path_and_compiling_calls_delay_the_probe() -> None:
    choice, call = _chooser([1.0], [1.0 / 1.04])  # eager 4% faster: inside the margin
    for _ in range(2 + 4 * LazyOrEager.PROBES):
        call()
    assert choice.chosen == LAZY and len(choice.decisions) == 1
    compiling = [True]
    _, cold_call = _chooser([2.0], [1.0], lambda: compiling[0])
    assert {cold_call() for _ in range(20)} == {LAZY}  # never warm: never probed
    compiling[0] = False
    assert [cold_call() for _ in range(5)] == [LAZY, LAZY, EAGER, EAGER, LAZY]


def test_what_a_call_leaves_to_the_next_is_charged_to_its_own_path() -> None:
    # lazy costs 1 and leaves 2 to whatever call comes next (memory to fault back in): alone it
    # costs 3 a call, eager 1.5. Alternating single calls would time lazy 1 and eager 3.5.
    choice, clock, left = LazyOrEager(measured=True), Clock(), [0.0]
    choice.clock = lambda: clock.now

    def path(name: str, own: float, leaves: float):
        def run() -> str:
            clock.now += own + left[0]
            left[0] = leaves
            return name

        return run

    lazily, eagerly = path(LAZY, 1.0, 2.0), path(EAGER, 1.5, 0.0)
    for _ in range(2 + 4 * LazyOrEager.PROBES):
        choice.call(lazily, eagerly, lambda: False)
    assert choice.decisions == [(EAGER, 3.0, 1.5)]


def test_always_lazy_is_never_measured() -> None:
    choice = LazyOrEager(measured=False)
    assert {choice.call(lambda: LAZY, lambda: EAGER, lambda: False) for _ in range(50)} == {LAZY}
    assert choice.describe() is None


def _step_and_state():
    rng = np.random.default_rng(0)
    w = dualflow.tensor(rng.normal(size=(8, 8)).astype(np.float32), requires_grad=True)
    opt = dualflow.optim.Adam([w], lr=1e-2)

    def step(x):
        opt.zero_grad()
        loss = (ops.tanh(x @ w) * 0.5).sum()
        loss.backward()
        opt.step()
        return loss

    return step, w


def test_switching_paths_mid_run_gives_eagers_bits() -> None:
    xs = [np.random.default_rng(i).normal(size=(4, 8)).astype(np.float32) for i in range(20)]
    eager_step, eager_w = _step_and_state()
    expected = [eager_step(dualflow.tensor(x)).item() for x in xs]
    step, w = _step_and_state()
    compiled = dualflow.compile(step)
    compiled._lazy_reason = "the test's"
    compiled._lazy_choice.clock = iter(np.arange(0.0, 1e6)).__next__  # every call costs 1
    compiled._lazy_choice.MARGIN = 0.5  # so eager wins its probe: lazy calls, then eager
    got = [compiled(dualflow.tensor(x)).item() for x in xs]
    assert got == expected
    np.testing.assert_array_equal(w.numpy(), eager_w.numpy())
    stats = compiled.stats()
    assert stats.lazy_eager_calls > 0 and stats.lazy_calls > 0, stats
    assert "calls ran eagerly" in str(dualflow.explain(compiled))


def test_an_eager_call_off_the_fast_path_is_all_or_nothing() -> None:
    w = dualflow.tensor([1.0, 2.0])

    def step(fail):
        ops.assign(w, w * 2)
        if fail:
            raise ValueError("after the write")
        return w.sum()

    compiled = dualflow.compile(step)
    compiled._lazy_reason = "the test's"
    compiled._lazy_choice.chosen, compiled._lazy_choice.measured = EAGER, False
    assert compiled(False).item() == 6.0
    with pytest.raises(ValueError, match="after the write"):
        compiled(True)
    assert w.numpy().tolist() == [2.0, 4.0] and compiled.stats().lazy_eager_calls == 2

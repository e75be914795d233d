"""Python side effects inside a compiled function happen at every call, with that call's values
(replayed after each plan run), or the function fails closed naming the line — never silently
once (issue 13, hole 5)."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.errors import TracingError

LOG: list = []
LAST = None


def _batches(n: int = 4) -> list[dualflow.Tensor]:
    rng = np.random.default_rng(0)
    return [dualflow.tensor(rng.normal(size=(8, 3)).astype(np.float32)) for _ in range(n)]


def _training(record):
    """A training loop whose step records its loss three common ways."""
    dualflow.random.seed(0)
    model = nn.Linear(3, 1)
    opt = optim.SGD(list(model.params()), lr=0.1)
    losses, history, meter = [], {}, types.SimpleNamespace(last=None, seen=[])

    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        record(loss, losses, history, meter)
        return loss

    return step, losses, history, meter


def _record(loss, losses, history, meter):
    losses.append(loss)
    history["loss"] = loss
    history["phase"] = "train"
    meter.last = loss
    meter.seen.append({"loss": loss, "tag": "train"})


def test_appends_and_stores_are_replayed_with_each_calls_values() -> None:
    runs = {}
    for mode in ("eager", "compiled"):
        step, losses, history, meter = _training(_record)
        run = dualflow.compile(step) if mode == "compiled" else step
        returned = [run(x) for x in _batches()]
        runs[mode] = [t.item() for t in losses]
        assert len(losses) == 4 and history["loss"] is losses[-1] is meter.last
        assert losses[-1] is returned[-1]  # the very tensor the call returned, as in eager
        assert [s["loss"].item() for s in meter.seen] == runs[mode]
        assert meter.seen[-1]["tag"] == "train" and history["phase"] == "train"
        if mode == "compiled":
            assert run.stats().plan_runs >= 2
    assert runs["compiled"] == runs["eager"]


def _global_store(x):
    global LAST
    y = x * 2
    LOG.append(y.sum())
    LAST = y
    return y


def test_global_list_and_global_name() -> None:
    compiled = dualflow.compile(_global_store)
    try:
        for value in (1.0, 2.0, 3.0):
            out = compiled(dualflow.tensor([value]))
            assert LAST is out and LOG[-1].item() == 2 * value
        assert len(LOG) == 3 and compiled.stats().plan_runs == 2
    finally:
        LOG.clear()


@pytest.mark.parametrize(
    "body",
    [
        "counter.n += 1",
        "counter.items.pop(0)",
        "counter.items.insert(0, y)",
        "counter.items.sort()",
        "del counter.extra",
        "counter.obj = Box()",
    ],
)
def test_changes_a_plan_cannot_replay_fail_closed_naming_the_line(body: str) -> None:
    namespace = {"dualflow": dualflow, "Box": type("Box", (), {})}
    source = f"def step(x, counter):\n    y = x * 2\n    {body}\n    return y\n"
    exec(compile(source, "user_step.py", "exec"), namespace)
    counter = types.SimpleNamespace(n=0, items=[3.0, 1.0, 2.0], extra=1)
    strict = dualflow.compile(namespace["step"], fallback="error")
    with pytest.raises(TracingError, match=r"user_step\.py:3"):
        strict(dualflow.tensor([1.0]), counter)
    lenient = dualflow.compile(namespace["step"])
    counter = types.SimpleNamespace(n=0, items=[3.0, 1.0, 2.0], extra=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            lenient(dualflow.tensor([1.0]), counter)
            counter.extra = 1  # so that `del` has something to delete at the next call
    assert any("from now on" in str(w.message) for w in caught)
    if body == "counter.n += 1":
        assert counter.n == 3  # every call happened, eagerly


def test_numpy_array_of_the_environment_changed_in_place_fails_closed() -> None:
    mean = np.zeros(2, np.float32)

    def step(x):
        mean[...] += 1.0
        return x - dualflow.tensor(mean)

    compiled = dualflow.compile(step, fallback="error")
    with pytest.raises(TracingError, match="numpy array"):
        compiled(dualflow.tensor([1.0, 1.0]))


def test_print_and_randomness_fail_closed_with_a_hint() -> None:
    import random

    def noisy(x):
        return x * random.random()

    def chatty(x):
        print("step")
        return x * 2

    with pytest.raises(TracingError, match=r"random\.random\(\)"):
        dualflow.compile(noisy, fallback="error")(dualflow.tensor([1.0]))
    with pytest.raises(TracingError, match=r"dualflow\.debug\.print"):
        dualflow.compile(chatty, fallback="error")(dualflow.tensor([1.0]))


def test_advancing_an_outside_iterator_fails_closed() -> None:
    data = iter([dualflow.tensor([1.0]), dualflow.tensor([2.0])])

    def step():
        return next(data) * 2

    with pytest.raises(TracingError, match="iterator"):
        dualflow.compile(step, fallback="error")()


def test_side_effect_on_a_container_made_inside_is_the_calls_own() -> None:
    def step(x):
        parts = []
        parts.append(x * 2)
        parts.append(x + 1)
        return ops.concat(parts, 0)

    compiled = dualflow.compile(step)
    for v in (1.0, 2.0, 3.0):
        assert compiled(dualflow.tensor([v])).tolist() == step(dualflow.tensor([v])).tolist()
    assert compiled.stats().plan_runs == 2


def test_reading_a_list_after_appending_to_it_fails_closed() -> None:
    history: list = []

    def step(x):
        history.append(x.sum())
        return x * len(history)  # depends on what the list held before the call

    compiled = dualflow.compile(step)
    for v in (1.0, 2.0, 3.0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = compiled(dualflow.tensor([v]))
        assert got.item() == v * len(history)

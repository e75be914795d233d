"""Side effects store containers the way pytree rebuilds them: a namedtuple, a dataclass or an
OrderedDict of the call's tensors is stored again at every call (compiled equals eager), an
object of the environment inside one stays that very object, and a container pytree cannot
rebuild exactly still fails closed."""

from __future__ import annotations

import dataclasses
import types
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import dualflow
from dualflow.errors import TracingError

Stats = namedtuple("Stats", ["loss", "scale"])


@dataclasses.dataclass
class Record:
    loss: dualflow.Tensor
    tag: str


def _inputs() -> list[dualflow.Tensor]:
    rng = np.random.default_rng(0)
    return [dualflow.tensor(rng.normal(size=(4,)).astype(np.float32)) for _ in range(4)]


def _run(step, compiled: bool):
    meter = types.SimpleNamespace(stats=None, record=None, log=OrderedDict(), history=[])
    run = dualflow.compile(step, fallback="error") if compiled else step
    seen = []
    for x in _inputs():
        out = run(x, meter)
        seen.append((meter.stats, meter.record, dict(meter.log), out))
    return meter, seen, run


def _step(x, meter):
    y = x * 2
    loss = (y * y).sum()
    meter.stats = Stats(loss, 0.5)
    meter.record = Record(loss=y.mean(), tag="train")
    meter.log["last"] = (loss, [y])
    return y


def test_a_namedtuple_dataclass_and_nested_containers_stored_compile_and_equal_eager() -> None:
    (_, eager, _), (_, compiled, run) = _run(_step, False), _run(_step, True)
    assert run.stats().plan_runs >= 2  # later calls replayed the stores after a plan run
    for (stats_e, rec_e, log_e, out_e), (stats_c, rec_c, log_c, out_c) in zip(eager, compiled):
        assert type(stats_c) is Stats and stats_c.scale == 0.5
        assert stats_c.loss.item() == stats_e.loss.item()
        assert type(rec_c) is Record and rec_c.tag == "train"
        assert rec_c.loss.item() == rec_e.loss.item()
        loss_c, (y_c,) = log_c["last"]
        assert loss_c.item() == log_e["last"][0].item() and y_c is out_c
        assert y_c.tolist() == out_e.tolist()


def test_an_outside_object_inside_a_stored_container_stays_that_object() -> None:
    shared: list = [1.0]

    def step(x, meter):
        y = x + 1
        meter.pair = (shared, y)
        return y

    meter = types.SimpleNamespace(pair=None)
    compiled = dualflow.compile(step, fallback="error")
    for x in _inputs():
        out = compiled(x, meter)
        assert meter.pair[0] is shared and meter.pair[1] is out
    shared.append(2.0)  # the very list: its later contents show through the stored pair
    assert meter.pair[0] == [1.0, 2.0] and compiled.stats().plan_runs >= 2


def test_a_container_pytree_cannot_rebuild_fails_closed() -> None:
    class Tagged(list):
        pass

    def step(x, meter):
        y = x * 3
        meter.kept = Tagged([y])
        return y

    meter = types.SimpleNamespace(kept=None)
    with pytest.raises(TracingError, match="Tagged"):
        dualflow.compile(step, fallback="error")(dualflow.tensor([1.0]), meter)

"""kernels.pool.pool_kernels' per-machine cost: the 2x2 max pool's one-thread time per image
element in the copies of ``machine_constants`` follows from a probe's timings (synthetic here),
stays in bounds or keeps its default with a note, is measured once per machine (an old record
again, once), and scales the pooling kernels' part size (``pool_part_min_for``), whose results
never depend on the split."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dualflow.background.process import using_threads
from dualflow.kernels.base import machine_constants as mc
from dualflow.kernels.base import per_machine
from dualflow.kernels.pool import pool_kernels as pk

COPY_NS = 0.2
TIMINGS = {"pool_s": 1e-4, "elements": 1e6}  # 0.1 ns an image element: half a copy


@pytest.fixture
def pool_cache(tmp_path, monkeypatch):
    """An empty kernels cache, measured values, machine constants of ``COPY_NS`` copies."""
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(per_machine.ENV, raising=False)
    monkeypatch.setattr(mc._CONSTANTS, "get", lambda: mc.MachineConstants(copy_ns=COPY_NS))
    monkeypatch.setattr(pk, "PART_MIN", None)
    pk._POOL_WORK.forget()
    yield tmp_path / "kernels"
    pk._POOL_WORK.forget()


def test_the_cost_is_the_pools_time_over_the_copys() -> None:
    assert pk.derive_pool_work(TIMINGS, COPY_NS) == pk.PoolWork(0.5, "measured")
    assert pk.derive_pool_work(TIMINGS, COPY_NS / 4).copies == 2.0


@pytest.mark.parametrize("pool_s", [1e-6, 1e-1])
def test_a_cost_out_of_bounds_keeps_the_default(pool_s: float) -> None:
    work = pk.derive_pool_work({**TIMINGS, "pool_s": pool_s}, COPY_NS)
    assert work.copies == mc.POOL_COPIES and "default kept" in work.note


def test_the_defaults_give_the_development_machines_part_size() -> None:
    assert pk.pool_work() == pk.PoolWork(1.5, "defaults")  # the suite's defaults
    assert mc.DEFAULTS.pool_part_min_for(pk.pool_work().copies) == 1 << 15
    assert pk.PART_MIN is not None or pk.part_min((2, 2), (2, 2)) == 1 << 15


def test_the_part_size_scales_with_the_measured_cost(pool_cache, monkeypatch) -> None:
    monkeypatch.setattr(pk, "_measure_pool", lambda: dict(TIMINGS))
    # half a copy an element, a third of the 1.5 the constants were derived for: 3x the part
    assert pk.pool_work().copies == 0.5
    assert pk.part_min((2, 2), (2, 2)) == 3 * mc.MachineConstants().pool_part_min
    assert pk.part_min((3, 3), (1, 1)) == 3 * mc.MachineConstants().pool_part_min // 9


def test_the_cost_is_measured_once_and_an_old_record_again(pool_cache, monkeypatch) -> None:
    store = per_machine.open_store("kernels")
    name = pk._POOL_WORK.entry_name()
    store.save(name, json.dumps({"timings": {"pool_s": 1e-4}}).encode())  # not today's fields
    measured = []
    monkeypatch.setattr(pk, "_measure_pool", lambda: measured.append(1) or dict(TIMINGS))
    assert pk.pool_work().copies == 0.5 and measured == [1]
    assert json.loads(store.load(name))["copies"] == 0.5
    pk._POOL_WORK.forget()  # a new process on the same machine: read back
    assert pk.pool_work().copies == 0.5 and measured == [1]


def test_a_real_probe_gives_a_record_and_the_pool_the_same_bits(pool_cache, monkeypatch) -> None:
    timings = pk._measure_pool()  # no bound on the value: only that it is a record's
    assert set(timings) == {"pool_s", "elements"} and all(v > 0 for v in timings.values())
    assert isinstance(pk._read_pool({"timings": timings}), pk.PoolWork)
    x = np.random.default_rng(2).standard_normal((2, 8, 64, 64), dtype=np.float32)
    whole = pk.max_pool2d(x, (2, 2), (2, 2), (0, 0))  # the machine's part size: one part here
    monkeypatch.setattr(pk, "PART_MIN", 1 << 12)
    with using_threads(2):
        assert pk.max_pool2d(x, (2, 2), (2, 2), (0, 0)).tobytes() == whole.tobytes()

"""kernels.base.machine_constants: the constants follow from a probe's timings by fixed models
(fed synthetic timings here: nothing is timed against a bound), implausible timings keep the
defaults with a note, the record is measured once per machine and read back from the signed
kernels cache, and the kernels read the machine's values unless a module overrides them."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.kernels.base import machine_constants as mc
from dualflow.kernels.base import per_machine
from dualflow.kernels.conv import column_copies
from dualflow.kernels.numba import numba_elementwise

# 60 GFLOP/s, 10 GB/s one thread; splitting 5 MB over two threads saves 0.5 ms for 0.1 ms
TIMINGS = dict(
    gemm_s=1e-3,
    gemm_flop=6e7,
    copy_s=1e-3,
    copy_bytes=5e6,
    split_s=6e-4,
    softmax_s=1e-4,
    softmax_elements=65536.0,
    handoff_s=1e-4,
    threads=2,
)
DEARER = {**TIMINGS, "handoff_s": 2e-4, "split_s": 7e-4}  # the same split, a dearer hand-off


def test_the_models_give_the_balance_and_the_break_even_part() -> None:
    c = mc.derive(TIMINGS)
    assert c.balance == 6  # 60 GFLOP/s over 10 GB/s
    # a split saves 1e-10 s per byte: the 1e-4 s hand-off is repaid from 1 MB, 0.5 MB a part
    assert c.part_min_bytes == 500_000 and c.part_min == 125_000
    assert c.note == "measured"
    # a dearer hand-off needs bigger parts; a faster GEMM makes memory traffic dearer in FLOPs
    assert mc.derive(DEARER).part_min_bytes == 1_000_000
    assert mc.derive({**TIMINGS, "gemm_s": 5e-4}).balance == 12
    # three threads: the same saving (the split copy's time) over more parts
    assert mc.derive({**TIMINGS, "threads": 3}).part_min_bytes == 333_333


def test_implausible_timings_keep_the_defaults_with_a_note() -> None:
    lost = mc.derive({**TIMINGS, "split_s": 1.2e-3})  # the split copy was slower (load)
    assert (lost.part_min, lost.part_min_bytes) == (mc.DEFAULTS.part_min, 1 << 20)
    assert "saved -10%" in lost.note and lost.balance == 6
    inline = mc.derive({**TIMINGS, "handoff_s": 1e-7})  # another call held the threads
    assert inline.part_min_bytes == mc.DEFAULTS.part_min_bytes and "no hand-off" in inline.note
    one = mc.derive({**TIMINGS, "threads": 1})
    assert one.part_min_bytes == mc.DEFAULTS.part_min_bytes and "one thread" in one.note
    wild = mc.derive({**TIMINGS, "gemm_s": 1e-6})  # 60 TFLOP/s on one core: not a measurement
    assert wild.balance == mc.DEFAULTS.balance and "balance 6000 out of" in wild.note
    # a 50 ms hand-off (a scheduler's stall) asks for 310 MB parts: beyond the bounds
    slow = mc.derive({**TIMINGS, "handoff_s": 0.05, "split_s": 0.0506})
    assert slow.part_min_bytes == mc.DEFAULTS.part_min_bytes and "part_min_bytes" in slow.note


@settings(max_examples=50, deadline=None)
@given(
    st.floats(1e-5, 1e-1),
    st.floats(1e-5, 1e-1),
    st.floats(0.0, 1.0),
    st.floats(1e-7, 1e-3),
    st.integers(1, 16),
    st.floats(1e-6, 1e-1),
)
def test_every_derived_value_is_in_bounds(gemm, copy, split, handoff, threads, softmax) -> None:
    t = dict(TIMINGS, gemm_s=gemm, copy_s=copy, split_s=split * copy, handoff_s=handoff)
    c = mc.derive({**t, "threads": threads, "softmax_s": softmax})
    low, high = mc.BOUNDS["balance"]
    assert low <= c.balance <= high
    for name in ("part_min_bytes", "part_flops", "softmax_part_min", "pool_part_min"):
        low, high = mc.BOUNDS[name]
        value = getattr(c, name)
        assert value == getattr(mc.DEFAULTS, name) or low <= value <= high
    assert c.part_min >= mc.PART_MIN_FLOOR
    assert c.note.startswith("measured")


def test_the_probe_times_every_field() -> None:
    timings = mc.measure()
    assert sorted(timings) == sorted(mc.FIELDS)
    assert all(v > 0 for v in timings.values())
    assert mc.derive(timings).note.startswith("measured")


def test_measured_once_per_machine_and_read_back(fresh_cache, monkeypatch) -> None:
    monkeypatch.setattr(mc, "measure", lambda: dict(TIMINGS))
    assert mc.machine_constants() == mc.derive(TIMINGS)
    (entry,) = fresh_cache.glob("machine_constants_*.json")
    assert per_machine.machine_key(mc.threads()) in entry.name
    record = json.loads(per_machine.open_store("kernels").load(entry.name))
    assert record["timings"] == TIMINGS and record["derived"]["part_min"] == 125_000
    mc.forget()  # a new process on the same machine: no measurement

    def fail() -> dict:
        raise AssertionError("measured again although the cache holds the timings")

    monkeypatch.setattr(mc, "measure", fail)
    assert mc.machine_constants().part_min_bytes == 500_000


def test_the_key_names_the_kernel_threads() -> None:
    assert per_machine.machine_key(1) != per_machine.machine_key(2)
    assert mc._CONSTANTS.entry_name().endswith(f"{per_machine.machine_key(mc.threads())}.json")


def test_a_record_that_is_not_one_is_measured_again(fresh_cache, monkeypatch) -> None:
    store = per_machine.open_store("kernels")
    name = mc._CONSTANTS.entry_name()
    bad = [b"not json", b"[]", json.dumps({"timings": {"gemm_s": 1.0}}).encode()]
    bad.append(json.dumps({"timings": {**TIMINGS, "copy_s": -1.0}}).encode())
    for payload in bad:
        store.save(name, payload)
        mc.forget()
        monkeypatch.setattr(mc, "measure", lambda: dict(DEARER))
        assert mc.machine_constants().part_min_bytes == 1_000_000


def test_the_suite_gets_the_defaults_without_measuring(monkeypatch) -> None:
    monkeypatch.setenv(per_machine.ENV, "defaults")
    monkeypatch.setattr(mc, "measure", lambda: pytest.fail("measured under defaults"))
    mc.forget()
    try:
        assert mc.machine_constants() == mc.DEFAULTS
        assert mc.DEFAULTS.describe().endswith("(defaults)")
    finally:
        mc.forget()


def test_kernels_read_the_machine_value_unless_overridden(fresh_cache, monkeypatch) -> None:
    monkeypatch.setattr(mc, "measure", lambda: dict(TIMINGS))
    monkeypatch.setattr(numba_elementwise, "PART_MIN", None)
    assert numba_elementwise._part_min() == 125_000
    assert column_copies.part_bytes(None) == 500_000
    monkeypatch.setattr(numba_elementwise, "PART_MIN", 8)
    assert numba_elementwise._part_min() == 8 and column_copies.part_bytes(8) == 8


def test_a_split_by_the_measured_part_gives_the_same_bits(fresh_cache, monkeypatch) -> None:
    # the smallest part the model gives: a 32K-element call runs in two parts
    small = {**TIMINGS, "handoff_s": 3.2768e-6, "split_s": 5e-4 + 3.2768e-6}
    monkeypatch.setattr(mc, "measure", lambda: small)
    assert mc.machine_constants().part_min == mc.PART_MIN_FLOOR
    from dualflow.kernels.backend import backend_of

    expr = ("call", "multiply", ("call", "add", ("var", "a0"), ("var", "a1")), ("var", "a0"))
    x, y = np.random.default_rng(0).standard_normal((2, 1 << 15), dtype=np.float32)
    kernel = backend_of(np).fused(expr, ("a0", "a1"), (((1 << 15,), "float32"),) * 2)
    np.testing.assert_array_equal(kernel(np, x, y), (x + y) * x)


def test_a_probe_whose_hand_off_ran_inline_is_used_but_not_kept(fresh_cache, monkeypatch) -> None:
    inline = {**TIMINGS, "handoff_s": 1e-7}  # measured inside a worker's part, say
    monkeypatch.setattr(mc, "measure", lambda: dict(inline))
    assert "no hand-off" in mc.machine_constants().note
    assert not list(fresh_cache.glob("machine_constants_*.json"))  # the next process measures
    mc.forget()
    monkeypatch.setattr(mc, "measure", lambda: dict(TIMINGS))
    assert mc.machine_constants().part_min == 125_000
    assert len(list(fresh_cache.glob("machine_constants_*.json"))) == 1


def test_the_gemm_rate_is_per_blas_thread_when_they_cannot_be_set(monkeypatch) -> None:
    @contextlib.contextmanager
    def unchanged():  # another thread may be in a GEMM: OpenBLAS keeps its 4 threads
        yield 1

    monkeypatch.setattr(mc, "one_blas_thread", unchanged)
    monkeypatch.setattr(mc.blas, "get_threads", lambda: 4)
    monkeypatch.setattr(mc, "best_of", lambda calls, repeats: [1e-3] * len(calls))
    timings = mc.measure()
    assert timings["gemm_s"] == 4e-3  # four threads' time counted as one thread's work

"""The harness's device hooks: clock reads wait for the device; the GPU high-water arithmetic."""

from __future__ import annotations

import gc
import sys
import types

import numpy as np

from dualflow.bench.harness import held_after_first_calls, peak_memory, time_calls
from dualflow.device import Device

ACTIVE: list = []  # the hooks a fake cupy pool would call, innermost last


class _FakeHook:
    # cupy.cuda.MemoryHook's part the bench relies on: entering registers the hook
    def __enter__(self):
        ACTIVE.append(self)
        return self

    def __exit__(self, *_):
        ACTIVE.remove(self)


def _fake_cupy(synced: list) -> types.SimpleNamespace:
    gpu = types.SimpleNamespace(synchronize=lambda: synced.append(1))
    return types.SimpleNamespace(
        cuda=types.SimpleNamespace(MemoryHook=_FakeHook, Device=lambda i: gpu)
    )


def test_time_calls_synchronizes_around_every_timed_call() -> None:
    events: list[str] = []
    times = time_calls(lambda: events.append("call"), 3, warmup=2, sync=lambda: events.append("s"))
    assert len(times) == 3
    assert events == ["call"] * 2 + ["s", "call", "s"] * 3


def test_time_calls_waits_for_the_compile_worker_after_warmup(monkeypatch) -> None:
    events: list[str] = []
    worker = types.SimpleNamespace(
        pending=lambda: 0 if "wait" in events else 2, wait=lambda: events.append("wait")
    )
    monkeypatch.delitem(sys.modules, "dualflow.kernels.numba.compile_worker", raising=False)

    def call() -> None:  # the first call imports the worker module (asks it for a kernel)
        sys.modules["dualflow.kernels.numba.compile_worker"] = worker
        events.append("call")

    time_calls(call, 2, warmup=2)
    assert events == ["call", "wait", "call", "call", "call"]  # warmup + repeats calls in all


def test_gpu_peak_is_the_high_water_mark_of_pool_blocks_held(monkeypatch) -> None:
    synced: list = []
    monkeypatch.setattr(Device, "xp", property(lambda self: _fake_cupy(synced)))

    def step() -> None:
        hook = ACTIVE[-1]
        hook.free_postprocess(mem_size=64)  # a block allocated before the measurement
        hook.malloc_postprocess(mem_size=100, mem_ptr=1)
        hook.malloc_postprocess(mem_size=50, mem_ptr=2)
        hook.malloc_postprocess(mem_size=1000, mem_ptr=0)  # a failed allocation holds nothing
        hook.free_postprocess(mem_size=100)
        hook.malloc_postprocess(mem_size=20, mem_ptr=3)

    # like tracemalloc's peak above the start: 64 freed, then 150 held at most -> 86 above it
    assert peak_memory(step, Device("cuda:0")) == 150 - 64
    assert len(synced) == 2 and not ACTIVE  # waited before and after; the hook is removed


def test_held_bytes_counts_a_compiled_steps_plan_buffers_once() -> None:
    import dualflow
    from dualflow.bench.modes import held_bytes

    x = dualflow.tensor(np.ones(4096, np.float32))
    step = dualflow.compile(lambda: ((x * 2).exp() + 1).tanh(), passes="O0")
    step()  # traced (and run eagerly): the plan has not allocated yet
    assert held_bytes(step) == 0 and held_bytes(lambda: None) == 0
    step()
    plan = step.history[-1].plan
    # three chained 16 KiB values share buffers: what is held is the raw buffers, not the views
    assert held_bytes(step) == sum(plan.memory.buffer_sizes) == plan.held_bytes > 0
    assert held_bytes(step) < 3 * 4096 * 4


def test_held_after_first_calls_counts_what_calls_leave_behind() -> None:
    kept: list = []

    def step():
        kept.append(np.ones(1000))  # 8 kB kept by every call
        return np.ones(10**6)  # the result, dropped at once

    assert 2 * 8000 <= held_after_first_calls(step) < 10**6


def test_held_after_first_calls_counts_arrays_only_a_cycle_holds() -> None:
    def step() -> None:
        garbage = [np.ones(10**5)]
        garbage.append(garbage)  # freed only when the garbage collector runs

    assert held_after_first_calls(step) >= 2 * 8 * 10**5


def test_on_a_gpu_held_is_what_the_pool_lent_and_did_not_get_back(monkeypatch) -> None:
    synced: list = []
    monkeypatch.setattr(Device, "xp", property(lambda self: _fake_cupy(synced)))

    def step() -> None:
        hook = ACTIVE[-1]
        hook.malloc_postprocess(mem_size=100, mem_ptr=1)  # kept between calls
        hook.malloc_postprocess(mem_size=50, mem_ptr=2)  # the result, freed
        hook.free_postprocess(mem_size=50)

    assert held_after_first_calls(step, 2, Device("cuda:0")) == 200
    assert not ACTIVE and gc.isenabled()

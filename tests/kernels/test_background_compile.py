"""Fused kernels compiled by the worker process: the blocked stand-in and the loaded kernel give
eager's bits, sums and donated calls the blocked evaluator cannot take wait, nothing runs that
this process did not render, and a dead worker only means compiling here."""

from __future__ import annotations

import collections
import json
import math
import multiprocessing
import select
import subprocess
import sys
import threading
import types
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow.kernels.base.lru_dict import Recent
from dualflow.kernels.expr.expression import compile_numpy
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.fused_cpu import fused_elementwise as kc
from dualflow.kernels.fused_cpu import fused_sum
from dualflow.kernels.numba import (
    background_compile,
    compile_worker,
    kernel_requests,
    numba_elementwise,
    numba_sum,
)

# tanh(a0 * 0.5 + 1) * a1 in float32: numba's program (tanh_f32), the blocked one's numpy_tanh
CHAIN = (
    "call",
    "multiply",
    ("call", "tanh", ("call", "add", ("call", "multiply", ("var", "a0"), ("const", 0.5)),
                      ("const", 1.0))),
    ("var", "a1"),
)  # fmt: skip
ARGS = ("a0", "a1")


@pytest.fixture
def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Background compiling on, a fresh cache root, no kernel cached in memory; the list counts
    blocked stand-in kernels made."""
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_worker, "_enabled", True)
    monkeypatch.setattr(compile_worker, "_deaths", [])
    monkeypatch.setattr(kc, "_CACHE", Recent(128))
    monkeypatch.setattr(numba_elementwise, "_MODULES", OrderedDict())  # no machine code in memory
    made: list[int] = []
    blocked = kc.blocked_kernel

    def counting(*args: object, **kwargs: object) -> object:
        made.append(1)
        return blocked(*args, **kwargs)

    monkeypatch.setattr(kc, "blocked_kernel", counting)
    yield made
    assert compile_worker.wait(120)


def _inputs(shape: tuple[int, ...]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=shape).astype(np.float32) * 4 for _ in ARGS]
    arrays[0].reshape(-1)[:4] = [np.nan, -0.0, np.inf, 30.0]
    return arrays


def _stats(program: object, shapes: tuple, shape: tuple, from_out: int | None = None) -> object:
    """numba's compile statistics of this process's kernel module for the program: its
    ``kernel``'s, with a flat module's ``entry`` and ``split`` added (a call split over the
    native crew runs ``split``, which links ``kernel``'s code: ``kernel`` itself is not called)."""
    flat, nest = numba_elementwise.layout(program, shapes, shape)
    source = numba_elementwise.render_source(program, flat, nest, from_out)[0]
    module = numba_elementwise._MODULES[numba_elementwise.stem(source)]
    names = ("kernel", "entry", "split") if flat is not None else ("kernel",)
    stats = [getattr(module, name).stats for name in names]
    hits = sum((s.cache_hits for s in stats), collections.Counter())
    misses = sum((s.cache_misses for s in stats), collections.Counter())
    return types.SimpleNamespace(cache_hits=hits, cache_misses=misses)


@pytest.mark.parametrize("shape", [(64, 33), (3, 8192)])  # a small runner; flat 1-D views
def test_the_stand_in_then_the_stored_kernel_give_eager_bits(
    stand_ins: list[int], shape: tuple[int, ...]
) -> None:
    arrays = _inputs(shape)
    want = compile_numpy(CHAIN, ARGS, ())(np, *arrays)
    metas = tuple((shape, "float32") for _ in ARGS)
    kernel = kc.cpu_kernel(CHAIN, ARGS, metas)
    np.testing.assert_array_equal(kernel(np, *arrays), want)
    assert compile_worker.pending() == 1 and stand_ins == [1]  # the worker cannot be done yet
    assert compile_worker.wait(120)
    np.testing.assert_array_equal(kernel(np, *arrays), want)
    stats = _stats(lower_expr(CHAIN, ARGS, ("float32", "float32")), (shape, shape), shape)
    assert sum(stats.cache_hits.values()) >= 1 and not stats.cache_misses  # loaded, not compiled
    kc._CACHE.clear()  # a new lowering of the same kernel: stored now, no worker, no stand-in
    assert kc.cpu_kernel(CHAIN, ARGS, metas)(np, *arrays).tobytes() == want.tobytes()
    assert stand_ins == [1] and compile_worker.pending() == 0


def test_a_donated_call_asks_for_its_in_place_kernel(stand_ins: list[int]) -> None:
    shape = (40, 50)
    arrays = _inputs(shape)
    want = compile_numpy(CHAIN, ARGS, ())(np, *arrays)
    kernel = kc.cpu_kernel(CHAIN, ARGS, tuple((shape, "float32") for _ in ARGS))
    target = arrays[1].copy()
    np.testing.assert_array_equal(kernel(np, arrays[0], target, out=target), want)
    assert compile_worker.pending() == 2  # the kernel, and the one reading a1 through out
    assert compile_worker.wait(120)
    target = arrays[1].copy()
    np.testing.assert_array_equal(kernel(np, arrays[0], target, out=target), want)
    program = lower_expr(CHAIN, ARGS, ("float32", "float32"))
    stats = _stats(program, (shape, shape), shape, from_out=1)
    assert sum(stats.cache_hits.values()) == 1 and not stats.cache_misses


def test_a_donated_call_the_blocked_evaluator_cannot_take_waits(stand_ins: list[int]) -> None:
    # where writes out in two passes (``inplace`` false): over its own input it would read
    # what it already wrote, so that call waits for the kernel
    expr = ("call", "where", ("call", "greater", ("var", "a0"), ("const", 0.0)), ("var", "a0"),
            ("var", "a1"))  # fmt: skip
    shape = (30, 30)
    x, y = _inputs(shape)
    want = np.where(x > 0, x, y)
    kernel = kc.cpu_kernel(expr, ARGS, ((shape, "float32"), (shape, "float32")))
    target = y.copy()
    np.testing.assert_array_equal(kernel(np, x, target, out=target), want)
    assert stand_ins == [] and compile_worker.pending() == 0  # waited: the worker answered both


def test_a_sum_waits_for_the_worker_and_gives_the_kernels_bits(stand_ins: list[int]) -> None:
    expr = ("call", "multiply", ("var", "a0"), ("var", "a1"))
    shape = (256, 300)
    x, y = _inputs((256, 300))
    x[0, 0] = y[0, 0] = 1.0  # finite
    metas = ((shape, "float32"), ((300,), "float32"))
    kernel = fused_sum.cpu_sum_kernel(expr, ARGS, metas)
    got = kernel(np, x, y[0])
    assert stand_ins == [] and compile_worker.pending() == 0
    program = lower_expr(expr, ARGS, ("float32", "float32"))
    layout = (*fused_sum.sum_layout((shape, (300,)), shape), ())
    source = numba_sum.sum_source(program, layout[1])
    stats = numba_elementwise._MODULES[numba_elementwise.stem(source)].kernel.stats
    assert sum(stats.cache_hits.values()) == 1 and not stats.cache_misses
    with compile_worker.synchronous():  # the same kernel, compiled here: the same bits
        here = numba_sum.numba_sum_kernel(program, *layout)(np, x, y[0])
    assert got.tobytes() == here.tobytes()


def test_a_worker_that_dies_means_compiling_here(stand_ins: list[int]) -> None:
    shape = (16, 16)
    arrays = _inputs(shape)
    want = compile_numpy(CHAIN, ARGS, ())(np, *arrays)
    kernel = kc.cpu_kernel(CHAIN, ARGS, tuple((shape, "float32") for _ in ARGS))
    worker = compile_worker._current()
    worker.process.kill()
    worker.process.wait()
    assert compile_worker.wait(30)  # the reader saw it end: nothing is outstanding
    np.testing.assert_array_equal(kernel(np, *arrays), want)
    stats = _stats(lower_expr(CHAIN, ARGS, ("float32", "float32")), (shape, shape), shape)
    assert sum(stats.cache_misses.values()) == 1 and not stats.cache_hits  # compiled here
    assert compile_worker._deaths == [worker.process.pid]


def test_shutdown_ends_the_worker_and_the_next_kernel_starts_another(stand_ins: list[int]) -> None:
    shape = (16, 16)
    arrays = _inputs(shape)
    want = compile_numpy(CHAIN, ARGS, ())(np, *arrays)
    metas = tuple((shape, "float32") for _ in ARGS)
    kernel = kc.cpu_kernel(CHAIN, ARGS, metas)
    first = compile_worker._current()
    dualflow.background.shutdown()  # the owner ends its services: the worker and its reader
    assert first.process.poll() is not None and compile_worker._current() is None
    assert compile_worker.wait(30) and compile_worker._deaths == []  # asked to end: no death
    np.testing.assert_array_equal(kernel(np, *arrays), want)  # its kernel compiles here
    kc.cpu_kernel(("call", "negative", CHAIN), ARGS, metas)  # a new kernel: a new worker
    second = compile_worker._current()
    assert second is not None and second.alive and second.process.pid != first.process.pid


def test_a_spec_that_is_not_plain_data_compiles_here(stand_ins: list[int]) -> None:
    program = lower_expr(CHAIN, ARGS, ("float32", "float32"))
    spec = (CHAIN, ARGS, (np.dtype("float32"), np.dtype("float32")))  # dtypes, not names
    shapes = ((4,), (4,))
    assert background_compile.pending_kernel(spec, program, shapes, (4,), lambda: None) is None
    with compile_worker.synchronous():
        assert not compile_worker.active()
    assert compile_worker.pending() == 0


def test_the_worker_renders_what_it_is_asked_for_or_nothing(stand_ins: list[int]) -> None:
    # a request whose stem is not the source the worker renders: it compiles nothing
    spec = [CHAIN, ARGS, ["float32", "float32"], [[4], [4]], [4]]
    directory = numba_elementwise.open_store("kernels").directory
    kernel_requests.build(["k_" + "0" * 24, *spec, "map", None])
    assert not list((directory / "__pycache__").glob("*.nbc"))
    program = lower_expr(CHAIN, ARGS, ("float32", "float32"))
    stem = numba_elementwise.stem(numba_elementwise.render_source(program, (True, True), ())[0])
    kernel_requests.build([stem, *spec, "map", None])
    assert len(list((directory / "__pycache__").glob(f"{stem}.*.nbc"))) == 1


def test_a_compiled_training_step_equals_eager_before_and_after_the_worker(
    stand_ins: list[int],
) -> None:
    def make() -> tuple:
        rng = np.random.default_rng(1)
        w = dualflow.tensor(rng.normal(size=(32, 48)).astype(np.float32), requires_grad=True)
        b = dualflow.tensor(np.zeros(48, np.float32), requires_grad=True)
        opt = dualflow.optim.SGD([w, b], lr=0.1, momentum=0.9)

        def step(x: dualflow.Tensor) -> dualflow.Tensor:
            opt.zero_grad()
            h = dualflow.ops.tanh(x @ w + b) * 0.5 + x.sum() * 0.001
            loss = (h * h).mean()
            loss.backward()
            opt.step()
            return loss

        return step, w, b

    xs = [np.random.default_rng(k).normal(size=(16, 32)).astype(np.float32) for k in range(6)]
    eager, compiled = make(), make()
    fn = dualflow.compile(compiled[0], passes="exact")
    for k, x in enumerate(xs):
        if k == 4:
            assert compile_worker.wait(120)  # the last calls run the worker's kernels
        want, got = eager[0](dualflow.tensor(x)), fn(dualflow.tensor(x))
        assert got.numpy().tobytes() == want.numpy().tobytes()
        for a, c in zip(eager[1:], compiled[1:]):
            assert c.numpy().tobytes() == a.numpy().tobytes()
    stats = fn.stats()  # two traces (the momentum buffers are born in the first), then plans
    assert stats.traces + stats.plan_runs == len(xs) and stats.plan_runs >= 3
    assert stand_ins  # the first plan runs ran blocked stand-ins, the last ones loaded kernels:
    kernels = [m.kernel for m in numba_elementwise._MODULES.values() if hasattr(m, "kernel")]
    assert any(sum(k.stats.cache_hits.values()) for k in kernels)
    assert math.isfinite(float(want.numpy()))


def _forked_child(queue: object, directory: Path, parent: int) -> None:
    none_yet = compile_worker._current() is None  # the child's owner holds none of the parent's
    own = compile_worker.worker_for(directory)
    queue.put((compile_worker.pending(), none_yet, own.process.pid != parent))
    own.close()


def test_a_forked_child_starts_its_own_worker(stand_ins: list[int]) -> None:
    # the parent's pipe and reader thread are not the child's: it never writes to them
    shape = (8, 8)
    kc.cpu_kernel(CHAIN, ARGS, tuple((shape, "float32") for _ in ARGS))(np, *_inputs(shape))
    assert compile_worker.pending() == 1
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    parent = compile_worker._current()
    child = context.Process(
        target=_forked_child, args=(queue, parent.directory, parent.process.pid)
    )
    child.start()
    assert queue.get(timeout=60) == (0, True, True)
    child.join(60)
    assert child.exitcode == 0 and compile_worker._current() is parent and parent.alive


def test_the_worker_skips_a_line_that_is_no_request(stand_ins: list[int]) -> None:
    directory = numba_elementwise.open_store("kernels").directory
    program = lower_expr(CHAIN, ARGS, ("float32", "float32"))
    stem = numba_elementwise.stem(numba_elementwise.render_source(program, (True, True), ())[0])
    request = [7, stem, CHAIN, ARGS, ["float32", "float32"], [[4], [4]], [4], "map", None]
    command = [sys.executable, "-m", "dualflow.kernels.numba.compile_worker", str(directory)]
    worker = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    worker.stdin.write("not json\n[1, 2]\n" + json.dumps(request) + "\n")
    worker.stdin.flush()
    answered = select.select([worker.stdout], [], [], 120)[0]  # never hang the suite
    assert answered and worker.stdout.readline() == "7\n"  # the two bad lines: skipped
    worker.stdin.close()  # the caller is gone: it exits
    assert worker.wait(60) == 0
    assert list((directory / "__pycache__").glob(f"{stem}.*.nbc"))


def test_threads_lowering_at_once_each_get_their_kernel(stand_ins: list[int]) -> None:
    # loopback ranks lower their plans in threads: their requests must not interleave
    exprs = [CHAIN]
    for _ in range(5):  # six kernel sources: CHAIN negated 0..5 times
        exprs.append(("call", "negative", exprs[-1]))
    metas = (((4, 3), "float32"), ((4, 3), "float32"))

    def lower(expr: tuple) -> None:
        kc.cpu_kernel(expr, ARGS, metas)

    threads = [threading.Thread(target=lower, args=(expr,)) for expr in exprs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert compile_worker.wait(120) and compile_worker._current().alive
    directory = numba_elementwise.open_store("kernels").directory
    for expr in exprs:
        source = numba_elementwise.render_source(
            lower_expr(expr, ARGS, ("float32",) * 2), (True,) * 2
        )[0]
        assert len(list(directory.glob(f"__pycache__/{numba_elementwise.stem(source)}.*.nbc"))) == 1

"""Overlapped all-reduces on loopback ranks: the default pipeline splits every bucket's all-reduce
in a compiled step, eager backward starts each bucket as its gradients become final, and the
parameters equal those of the blocking versions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import optim
from dualflow.distributed import create_multi_node_optimizer, run_loopback
from dualflow.passes import O2
from tests.distributed.helpers import (
    NAMES,
    batches,
    data_parallel,
    loss_of,
    make_params,
    make_step,
)


def single_process_grads(batch: tuple) -> list[np.ndarray]:
    """The gradient of the mean loss over the whole batch, in one process."""
    params = make_params()
    x, t = batch
    loss_of(params, dualflow.tensor(x), dualflow.tensor(t)).backward()
    return [p.grad.numpy() for p in params]


PER_RANK = 3
NO_OVERLAP = tuple(p for p in O2 if p != "bucket_allreduce")


def train(comm: Any, data: list, passes: Any, compile: bool = True) -> tuple[list, Any]:
    """This rank's final parameters (and its compiled step) after SGD on its rows."""
    params = make_params()
    opt = create_multi_node_optimizer(optim.SGD(params, lr=0.5), comm, bucket_mb=128 / 2**20)
    step = make_step(params, opt)
    fn = dualflow.compile(step, fallback="error", passes=passes) if compile else step
    lo, hi = comm.rank * PER_RANK, (comm.rank + 1) * PER_RANK
    for x, t in data:
        fn(dualflow.tensor(x[lo:hi]), dualflow.tensor(t[lo:hi]))
    return [p.numpy() for p in params], fn


def test_compiled_step_overlaps_and_equals_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DUALFLOW_PASSES", raising=False)  # the default pipeline
    data = batches(4, PER_RANK, 2)
    eager = run_loopback(lambda c: train(c, data, None, compile=False)[0], 2)
    overlapped = run_loopback(lambda c: train(c, data, None), 2)
    blocking = run_loopback(lambda c: train(c, data, NO_OVERLAP), 2)
    for (params, fn), (plain, plain_fn), want in zip(overlapped, blocking, eager):
        ops = [n.op for n in fn.history[-1].graph.nodes]
        assert "allreduce" not in ops
        assert ops.count("allreduce_start") == ops.count("allreduce_wait") == 3
        assert [n.op for n in plain_fn.history[-1].graph.nodes].count("allreduce") == 3
        assert fn.stats().plan_runs == 3  # the first call traces
        for got, same, ref in zip(params, plain, want):
            np.testing.assert_array_equal(got, same)
            np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)
    for a, b in zip(overlapped[0][0], overlapped[1][0]):
        np.testing.assert_array_equal(a, b)


def test_some_backward_work_runs_while_a_bucket_is_in_flight() -> None:
    data = batches(2, PER_RANK, 2)
    (_, fn), _ = run_loopback(lambda c: train(c, data, "O2"), 2)
    graph = fn.history[-1].graph
    first_start = next(i for i, n in enumerate(graph.nodes) if n.op == "allreduce_start")
    first_wait = next(i for i, n in enumerate(graph.nodes) if n.op == "allreduce_wait")
    between = graph.nodes[first_start + 1 : first_wait]
    assert any(n.op == "matmul" for n in between)  # a weight gradient computed meanwhile


def test_allreduce_handles_live_on_the_host_whatever_the_array_module() -> None:
    # A device-array handle would make allreduce_wait's int() synchronize a GPU stream.
    import types

    from dualflow.distributed import create_communicator
    from dualflow.ops.collective import AllReduceStart, AllReduceWait

    comm = create_communicator("loopback")
    no_device_arrays = types.SimpleNamespace(
        ascontiguousarray=np.ascontiguousarray,
        asarray=lambda *a, **k: pytest.fail("the handle must not become a device array"),
    )
    x = np.arange(3.0)
    handle = AllReduceStart.forward(no_device_arrays, x, comm=comm.comm_id, reduction="sum")
    assert type(handle) is np.ndarray and handle.dtype == np.int64 and handle.shape == ()
    assert AllReduceWait.forward(np, handle, x, comm=comm.comm_id).tolist() == [0.0, 1.0, 2.0]


def test_eager_backward_starts_each_bucket_as_its_gradients_become_final() -> None:
    data = batches(1, PER_RANK, 2)

    def body(comm: Any) -> tuple:
        params = make_params()
        named = zip(NAMES, params)
        opt = create_multi_node_optimizer(
            optim.SGD(params, lr=0.5), comm, bucket_mb=128 / 2**20, named_params=named
        )
        started, raw = [], comm.start_allreduce

        def spy(array: Any, *args: Any, **options: Any) -> Any:
            started.append((options.get("bucket"), [p.grad is not None for p in params]))
            return raw(array, *args, **options)

        comm.start_allreduce = spy
        x, t = data[0]
        lo, hi = comm.rank * PER_RANK, (comm.rank + 1) * PER_RANK
        opt.zero_grad()
        loss_of(params, dualflow.tensor(x[lo:hi]), dualflow.tensor(t[lo:hi])).backward()
        return started, [p.grad.numpy() for p in params]

    (started, grads0), (_, grads1) = run_loopback(body, 2)
    # buckets in reverse model order: [fc2.bias, fc2.weight], [fc1.bias], [fc1.weight]
    assert [bucket for bucket, _ in started] == [0, 1, 2]
    assert started[0][1] == [False, False, True, True]  # fc1 still has no gradient
    want = single_process_grads(data[0])
    for a, b, w in zip(grads0, grads1, want):  # averaged when backward() returns (DDP)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, w, rtol=1e-6, atol=1e-7)


def test_eager_overlap_on_and_off_train_alike() -> None:
    data = batches(3, PER_RANK, 2, np.float64)

    def body(comm: Any, overlap: bool) -> list:
        return data_parallel(comm, data, PER_RANK, bucket_mb=1e-4, overlap=overlap)[0]

    on = run_loopback(lambda c: body(c, True), 2)
    off = run_loopback(lambda c: body(c, False), 2)
    for a, b in zip(on[0], off[0]):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


def test_a_dropped_optimizer_stops_observing_at_once() -> None:
    # No reference cycle: the reducer of a dropped optimizer goes immediately on every rank,
    # instead of whenever each rank's garbage collector runs (which would differ by rank).
    import gc
    import weakref

    from dualflow.distributed import create_communicator

    gc.disable()
    try:
        params = make_params()
        opt = create_multi_node_optimizer(
            optim.SGD(params, lr=0.1), create_communicator("loopback")
        )
        reducer = weakref.ref(opt.reducer)
        del opt
        assert reducer() is None
    finally:
        gc.enable()

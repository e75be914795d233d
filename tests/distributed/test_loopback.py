"""The loopback communicator's collectives, ``bcast_params`` and failure propagation."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops
from dualflow.distributed import create_communicator, create_loopback_group, run_loopback
from dualflow.errors import CommunicatorError


@pytest.mark.parametrize("size", [1, 2, 3])
def test_allreduce_sum_and_mean(size: int) -> None:
    def body(comm):
        x = np.arange(6, dtype=np.float32).reshape(2, 3) * (comm.rank + 1)
        return comm.allreduce(x), comm.allreduce(x, op="mean")

    total = sum(range(1, size + 1))
    want = np.arange(6, dtype=np.float32).reshape(2, 3) * total
    for summed, mean in run_loopback(body, size):
        np.testing.assert_array_equal(summed, want)
        np.testing.assert_allclose(mean, want / size, rtol=1e-6)
        assert summed.dtype == np.float32


def test_allreduce_out_of_place_and_in_place() -> None:
    def body(comm):
        x = np.full(3, comm.rank + 1.0)
        fresh = comm.allreduce(x)
        same = comm.allreduce(x, out=x)
        return fresh, same is x, x

    for fresh, is_same, x in run_loopback(body, 2):
        assert is_same
        np.testing.assert_array_equal(fresh, [3.0, 3.0, 3.0])
        np.testing.assert_array_equal(x, [3.0, 3.0, 3.0])


def test_allreduce_of_a_tensor_is_differentiable() -> None:
    def body(comm):
        x = dualflow.tensor([1.0, 2.0], requires_grad=True)
        y = comm.allreduce(x * (comm.rank + 1.0))
        (y * y).sum().backward()
        return y.numpy(), x.grad.numpy()

    (y0, g0), (_, g1) = run_loopback(body, 2)
    np.testing.assert_array_equal(y0, [3.0, 6.0])
    # d/dx_r of sum_k |y|^2 with y = x*1 + x*2: allreduce(2y) * (r + 1).
    np.testing.assert_array_equal(g0, 2 * 2 * np.array([3.0, 6.0]))
    np.testing.assert_array_equal(g1, 2 * 2 * np.array([3.0, 6.0]) * 2)


def test_mismatched_shapes_raise_on_every_rank() -> None:
    with pytest.raises(
        CommunicatorError,
        match=r"(?s)ranks disagree at collective #1 .*rank 0: #1 allreduce sum float64\[1\] at "
        r"test_loopback.py:\d+.*rank 1: #1 allreduce sum float64\[2\].*same shapes and dtypes",
    ):
        run_loopback(lambda comm: comm.allreduce(np.zeros(comm.rank + 1)), 2)


def test_bcast_array_object_allgather_gather_scatter() -> None:
    def body(comm):
        array = np.arange(4.0) if comm.rank == 1 else np.zeros(4)
        got = comm.bcast(array, root=1)
        obj = comm.bcast({"seed": 7} if comm.rank == 0 else None)
        gathered = comm.gather(comm.rank * 10, root=1)
        part = comm.scatter(["a", "b", "c"] if comm.rank == 0 else None)
        comm.barrier()
        return got is array, got, obj, comm.allgather(comm.rank), gathered, part

    results = run_loopback(body, 3)
    for rank, (same, got, obj, everyone, gathered, part) in enumerate(results):
        assert same
        np.testing.assert_array_equal(got, np.arange(4.0))
        assert obj == {"seed": 7} and everyone == [0, 1, 2]
        assert gathered == ([0, 10, 20] if rank == 1 else None)
        assert part == "abc"[rank]


def test_bcast_to_a_non_array_fails_clearly() -> None:
    with pytest.raises(CommunicatorError, match=r"(?s)rank 1: #1 bcast root=0 object.*to receive"):
        run_loopback(lambda comm: comm.bcast(np.ones(2) if comm.rank == 0 else None), 2)


def _mlp(hidden: int = 5) -> nn.Module:
    return nn.Sequential(nn.Linear(4, hidden), nn.BatchNorm1d(hidden), nn.Linear(hidden, 2))


def test_bcast_params_makes_every_rank_equal_to_root() -> None:
    def body(comm):
        model = _mlp()
        for _, t in model.named_params():  # different weights per rank
            t.raw_array[...] = np.random.default_rng(comm.rank).normal(size=t.shape)
        model[1].running_mean.raw_array[...] = comm.rank  # a buffer too
        before = {k: t.numpy().copy() for k, t in model.state_dict().items()}
        comm.bcast_params(model)
        return before, {k: t.numpy().copy() for k, t in model.state_dict().items()}

    ranks = run_loopback(body, 3)
    root_before = ranks[0][0]
    for _, after in ranks:
        assert after.keys() == root_before.keys()
        for key, want in root_before.items():
            np.testing.assert_array_equal(after[key], want, err_msg=key)
    np.testing.assert_array_equal(ranks[2][1]["1.running_mean"], np.zeros(5))


def test_bcast_params_names_the_first_mismatch() -> None:
    def body(comm):
        comm.bcast_params(_mlp(hidden=5 if comm.rank == 0 else 6))

    with pytest.raises(
        CommunicatorError, match=r"'0.weight' \(5, 4\) float32.*'0.weight' \(6, 4\)"
    ):
        run_loopback(body, 2)


def test_bcast_params_reports_a_missing_parameter() -> None:
    def body(comm):
        layers = [nn.Linear(4, 2)] + ([nn.Linear(2, 2)] if comm.rank == 0 else [])
        comm.bcast_params(nn.Sequential(*layers))

    with pytest.raises(CommunicatorError, match="rank 1 has nothing"):
        run_loopback(body, 2)


def test_the_failing_rank_error_is_raised_not_the_waiters() -> None:
    def body(comm):
        if comm.rank == 1:
            raise KeyError("rank 1 broke")
        comm.barrier()

    with pytest.raises(KeyError, match="rank 1 broke"):
        run_loopback(body, 3)


def test_a_group_of_communicators_and_the_op_by_id() -> None:
    comms = create_loopback_group(2)
    assert [c.rank for c in comms] == [0, 1] and comms[0].comm_id != comms[1].comm_id
    solo = create_communicator("loopback")
    assert ops.allreduce(np.ones(2), solo.comm_id, "mean").tolist() == [1.0, 1.0]


def test_unknown_names_and_bad_reductions() -> None:
    with pytest.raises(ValueError, match="unknown communicator"):
        create_communicator("gloo")
    with pytest.raises(ValueError, match="reduction must be one of"):
        ops.allreduce(np.ones(2), create_communicator("loopback"), "max")


def test_nccl_without_cupy_says_what_to_install() -> None:
    pytest.importorskip("mpi4py")
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed; the error path is for machines without it")
    except ImportError:
        pass
    with pytest.raises(CommunicatorError, match=r"nccl needs cupy and a CUDA GPU: pip install"):
        create_communicator("nccl")

"""Issue 36, item 3: every collective agrees on shapes, dtypes (hence byte counts) and roots on
every rank before any data moves, and every rank raises the same error otherwise (loopback
here; ``test_mpi_promises.py`` checks that MPI raises the same text).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dualflow
from dualflow import ops
from dualflow.distributed import run_loopback
from dualflow.distributed.agreement import CollectiveMismatch
from dualflow.errors import CommunicatorError


def _outcomes(body: Any, size: int = 2) -> list[tuple[Any, Any]]:
    """Run ``body(comm)`` on every rank: each rank's (result or None, error text or None)."""

    def catching(comm: Any) -> tuple[Any, Any]:
        try:
            return body(comm), None
        except CommunicatorError as exc:
            return None, str(exc)

    return run_loopback(catching, size)


def _same_error_on_every_rank(outcomes: list[tuple[Any, Any]]) -> str:
    errors = [error for _, error in outcomes]
    assert all(errors), f"a rank did not raise: {outcomes}"
    texts = {re.sub(r"this is rank \d+", "this is rank R", e) for e in errors}
    assert len(texts) == 1, texts
    return errors[0]


def test_bcast_into_another_dtype_raises_on_every_rank_and_moves_nothing() -> None:
    receivers = [np.zeros(6, np.float32) for _ in range(2)]

    def body(comm: Any) -> Any:
        mine = np.arange(6.0) if comm.rank == 0 else receivers[comm.rank]
        return comm.bcast(mine)

    message = _same_error_on_every_rank(_outcomes(body))
    assert "rank 0: #1 bcast root=0 float64[6]" in message
    assert "rank 1: #1 bcast root=0 float32[6]" in message
    np.testing.assert_array_equal(receivers[1], np.zeros(6, np.float32))  # untouched


def test_bcast_into_another_shape_is_not_reshaped_silently() -> None:
    def body(comm: Any) -> Any:
        return comm.bcast(np.ones((2, 3)) if comm.rank == 0 else np.zeros((3, 2)))

    message = _same_error_on_every_rank(_outcomes(body))
    assert "float64[2,3]" in message and "float64[3,2]" in message


def test_bcast_into_a_read_only_array_fails_every_rank_first() -> None:
    def body(comm: Any) -> Any:
        receiver = np.zeros(3)
        receiver.flags.writeable = comm.rank == 0
        return comm.bcast(np.ones(3) if comm.rank == 0 else receiver)

    message = _same_error_on_every_rank(_outcomes(body))
    assert "cannot run: bcast: rank 1's receiving array is read-only" in message
    assert "no data moved on any rank" in message


def test_bcast_into_a_non_contiguous_array_fills_it() -> None:
    def body(comm: Any) -> Any:
        base = np.zeros((3, 4))
        view = base[:, ::2]  # (3, 2), not contiguous
        got = comm.bcast(np.arange(6.0).reshape(3, 2) if comm.rank == 0 else view)
        return got is view or comm.rank == 0, base

    outcomes = _outcomes(body)
    assert all(error is None and same for (same, _), error in outcomes)
    receiver = outcomes[1][0][1]
    np.testing.assert_array_equal(receiver[:, ::2], np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(receiver[:, 1::2], np.zeros((3, 2)))


@pytest.mark.parametrize(
    ("arrays", "expected"),
    [
        ((np.array([None, None]), np.array([None, None])), "dtype object cannot travel"),
        ((np.ones(2, np.int64), np.ones(2, np.int64)), "reduction 'mean' needs a float array"),
        ((np.ones(2, ">f4"), np.ones(2, ">f4")), "not in this machine's byte order"),
    ],
)
def test_arrays_no_backend_can_reduce_fail_every_rank_before_the_transfer(
    arrays: tuple, expected: str
) -> None:
    message = _same_error_on_every_rank(
        _outcomes(lambda comm: comm.allreduce(arrays[comm.rank], "mean"))
    )
    assert "cannot run" in message and expected in message


def test_an_out_of_another_shape_fails_every_rank() -> None:
    def body(comm: Any) -> Any:
        out = np.zeros(3 if comm.rank == 0 else 4)
        return comm.allreduce(np.ones(3), out=out)

    message = _same_error_on_every_rank(_outcomes(body))
    assert "out= must be an array like the input (float64[3]) on rank 1, got float64[4]" in message


def test_scatter_with_a_short_list_fails_every_rank() -> None:
    message = _same_error_on_every_rank(
        _outcomes(lambda comm: comm.scatter(["a"] if comm.rank == 0 else None), 3)
    )
    assert "scatter: rank 0 must pass a list of 3 items" in message


def test_a_root_outside_the_group_on_one_rank_fails_every_rank() -> None:
    message = _same_error_on_every_rank(
        _outcomes(lambda comm: comm.gather(comm.rank, root=0 if comm.rank == 0 else 5))
    )
    assert "gather root=0" in message and "gather root=5" in message


def test_a_single_rank_group_checks_too() -> None:
    (outcome,) = _outcomes(lambda comm: comm.allreduce(np.ones(2, np.int32), "mean"), 1)
    assert "reduction 'mean' needs a float array, got int32" in outcome[1]


_DTYPES = st.sampled_from(["float32", "float64", "int32", "int64", "float16", "uint8"])
_SHAPES = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(_SHAPES, _DTYPES), min_size=2, max_size=2), st.booleans())
def test_random_shapes_and_dtypes_agree_or_fail_together(specs: list, bcast: bool) -> None:
    def body(comm: Any) -> Any:
        shape, dtype = specs[comm.rank]
        array = np.full(shape, comm.rank + 1, dtype)
        return comm.bcast(array) if bcast else comm.allreduce(array)

    outcomes = _outcomes(body)
    if specs[0] == specs[1]:
        shape, dtype = specs[0]
        want = np.full(shape, 1 if bcast else 3, dtype)
        for result, error in outcomes:
            assert error is None
            np.testing.assert_array_equal(result, want)
    else:
        message = _same_error_on_every_rank(outcomes)
        assert message.startswith("ranks disagree at collective #1")


def test_mismatches_are_collective_mismatch_errors() -> None:
    with pytest.raises(CollectiveMismatch):
        run_loopback(lambda comm: comm.bcast(np.zeros(comm.rank + 1)), 2)


@pytest.mark.parametrize("compiled", [False, True])
def test_a_0d_allreduce_keeps_its_shape(compiled: bool) -> None:
    def body(comm: Any) -> Any:
        def mean(x: Any) -> Any:
            return ops.allreduce(x, comm, "mean")

        fn = dualflow.compile(mean) if compiled else mean
        loss = dualflow.tensor(np.float32(comm.rank + 1))
        return [fn(loss * k) for k in (1, 2)], comm.allreduce(np.array(comm.rank + 1.0))

    for results, raw in run_loopback(body, 2):
        assert [r.shape for r in results] == [(), ()] and raw.shape == ()
        assert [r.item() for r in results] == [1.5, 3.0] and raw.item() == 3.0

"""Checkpoints of a data-parallel run: rank 0 writes one file; every rank resumes its own part.

After a step, parameters and optimizer state are the same on every rank, so they are saved once
(rank 0's). What differs per rank — random generators, the loader's position, buffers such as
BatchNorm's running statistics, the loop's running metrics — is gathered to rank 0 and saved as
``ranks[r]``. Rank 0 writes atomically (a temporary file renamed into place) and tells every rank
whether that worked; on resume rank 0 reads and verifies the file and broadcasts it, and rank
``r`` restores the shared part plus ``ranks[r]``.
"""

from __future__ import annotations

import os
from typing import Any

from dualflow.errors import CheckpointError
from dualflow.training.checkpoint import load_checkpoint, save_checkpoint

PER_RANK = ("rng", "loader", "loop")


def is_distributed(comm: Any) -> bool:
    """Whether ``comm`` is a communicator of more than one rank.

    Example:
        >>> from dualflow.distributed import create_communicator
        >>> is_distributed(None), is_distributed(create_communicator("loopback"))
        (False, False)
    """
    return comm is not None and getattr(comm, "size", 1) > 1


def rank_part(state: dict[str, Any], model: Any) -> dict[str, Any]:
    """The part of a ``capture`` snapshot that differs between ranks (buffers, RNG, loader...).

    Example:
        >>> from dualflow import nn, optim
        >>> from dualflow.training import capture
        >>> model = nn.BatchNorm1d(2)
        >>> part = rank_part(capture(model, optim.SGD(list(model.params()), lr=0.1)), model)
        >>> sorted(part)
        ['buffers', 'loader', 'loop', 'rng']
        >>> sorted(part["buffers"])
        ['num_batches_tracked', 'running_mean', 'running_var']
    """
    params = {name for name, _ in model.named_params()}
    part = {key: state[key] for key in PER_RANK}
    part["buffers"] = {k: v for k, v in state["model"].items() if k not in params}
    return part


def save_distributed(state: dict[str, Any], model: Any, comm: Any, path: str) -> None:
    """Write one checkpoint of every rank's ``state`` (a ``capture``) from rank 0 (collective).

    Raises:
        CheckpointError: on every rank, when rank 0 could not write the file.
    """
    parts = comm.gather(rank_part(state, model), root=0)
    error = None
    if comm.rank == 0:
        try:
            save_checkpoint({**state, "world_size": comm.size, "ranks": parts}, path)
        except Exception as exc:  # told to every rank below, then raised everywhere
            error = f"{type(exc).__name__}: {exc}"
    error = comm.bcast(error, root=0)
    if error is not None:
        raise CheckpointError(f"rank 0 could not write the checkpoint {os.fspath(path)!r}: {error}")


def load_distributed(path: str, comm: Any) -> dict[str, Any]:
    """This rank's ``capture`` snapshot from a checkpoint rank 0 reads (a collective).

    A checkpoint of a single-process run gives every rank the same state.

    Raises:
        CheckpointError: on every rank, when the file is missing or corrupted, or was written
            by a job of another size.
    """
    state, error = None, None
    if comm.rank == 0:
        try:
            state = load_checkpoint(path)
        except CheckpointError as exc:
            error = str(exc)
    state, error = comm.bcast((state, error), root=0)
    if error is not None:
        raise CheckpointError(error)
    ranks = state.pop("ranks", None)
    size = state.pop("world_size", None)
    if ranks is None:
        return state
    if size != comm.size or len(ranks) != comm.size:
        raise CheckpointError(
            f"{os.fspath(path)!r} was written by a {size}-rank job; this job has {comm.size} "
            "ranks: resume with the same number of ranks"
        )
    mine = ranks[comm.rank]
    state.update({key: mine[key] for key in PER_RANK})
    state["model"] = {**state["model"], **mine["buffers"]}
    return state

"""Training checkpoints: everything a resumed run needs to continue bit for bit, and restoring it.

A checkpoint holds the model's parameters and buffers, the optimizer's state, the scheduler's
state, the state of every default random generator the model can draw from (dropout masks), the
data loader's position and the loop's own counters. Restoring is all or nothing.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dualflow import ops
from dualflow._config import no_grad
from dualflow.device import Device, send
from dualflow.errors import CheckpointError
from dualflow.serialization import load, save
from dualflow.tensor.random import Generator, default_generator

FORMAT = "dualflow-training-checkpoint"
VERSION = 1


def default_generators(model: Any) -> dict[str, Generator]:
    """The default generator of the CPU and of every device holding a parameter of ``model``.

    Example:
        >>> from dualflow import nn
        >>> list(default_generators(nn.Linear(2, 2)))
        ['cpu']
    """
    devices = {Device("cpu")} | {p.device for p in model.params()}
    return {str(d): default_generator(d) for d in sorted(devices, key=str)}


def _host_copy(value: Any) -> np.ndarray:
    return np.array(value.numpy() if hasattr(value, "numpy") else value, copy=True)


def capture(
    model: Any, optimizer: Any, scheduler: Any = None, loader: Any = None, loop: Any = None
) -> dict[str, Any]:
    """A snapshot of the whole training state as host arrays and plain values.

    Args:
        model: a Module (parameters and buffers are saved by dotted name).
        optimizer: anything with ``state_dict()`` (its state tensors are already copies).
        scheduler: an lr scheduler or None.
        loader: the training loader; its ``state_dict()`` is kept when it has one.
        loop: plain values of the loop itself (epoch, step, running metrics, history).

    Returns:
        A dict that ``dualflow.save`` writes and :func:`restore` reads back.

    Example:
        >>> from dualflow import nn, optim
        >>> model = nn.Linear(2, 1)
        >>> state = capture(model, optim.SGD(list(model.params()), lr=0.1))
        >>> sorted(state["model"]), list(state["rng"])
        (['bias', 'weight'], ['cpu'])
    """
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": {k: _host_copy(v) for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "rng": {k: _host_copy(g.state) for k, g in default_generators(model).items()},
        "loader": loader.state_dict() if hasattr(loader, "state_dict") else None,
        "loop": loop,
    }


def restore(
    state: dict[str, Any], model: Any, optimizer: Any, scheduler: Any = None, loader: Any = None
) -> Any:
    """Load a :func:`capture` snapshot into the objects; returns its ``loop`` values.

    Tensors are written in place (their identity is kept, which a compiled step relies on). If
    any part does not fit, everything restored so far is rolled back and the error re-raised.

    Raises:
        CheckpointError: not a training checkpoint, or scheduler presence does not match.
        ShapeError, ValueError, KeyError: a part does not fit its object (from its loader).

    Example:
        >>> from dualflow import nn, optim
        >>> model = nn.Linear(2, 1); opt = optim.SGD(list(model.params()), lr=0.1)
        >>> saved = capture(model, opt, loop={"step": 3})
        >>> _ = ops.assign(model.bias, 5.0)
        >>> restore(saved, model, opt), model.bias.item() == float(saved["model"]["bias"][0])
        ({'step': 3}, True)
    """
    _check_format(state, scheduler)
    before = capture(model, optimizer, scheduler, loader)
    try:
        _apply(state, model, optimizer, scheduler, loader)
    except BaseException:
        _apply(before, model, optimizer, scheduler, loader)  # all or nothing
        raise
    return state.get("loop")


def _check_format(state: Any, scheduler: Any) -> None:
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError("not a dualflow training checkpoint (written by fit/capture)")
    if state.get("version") != VERSION:
        raise CheckpointError(
            f"training checkpoint version {state.get('version')!r}, not {VERSION}"
        )
    if (scheduler is None) != (state.get("scheduler") is None):
        has = "has" if state.get("scheduler") is not None else "has no"
        given = "was" if scheduler is not None else "was not"
        raise CheckpointError(
            f"the checkpoint {has} scheduler state but a scheduler {given} given; resume with "
            "the same training set-up"
        )


def _apply(state: dict, model: Any, optimizer: Any, scheduler: Any, loader: Any) -> None:
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None:
        scheduler.load_state_dict(state["scheduler"])
    if state.get("loader") is not None and hasattr(loader, "load_state_dict"):
        loader.load_state_dict(state["loader"])
    with no_grad():
        for device, array in state["rng"].items():
            generator = default_generator(device)
            ops.assign(generator.state, send(np.asarray(array), generator.device))


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike) -> None:
    """Write a :func:`capture` snapshot to ``path`` atomically (``dualflow.save``, no pickle)."""
    save(state, path)


def load_checkpoint(path: str | os.PathLike, max_bytes: int | None = None) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (``max_bytes``: the decompression
    limit of ``dualflow.load``).

    Raises:
        CheckpointError: the file is missing, corrupted, too large or not a training checkpoint.

    Example:
        >>> import os, tempfile
        >>> from dualflow import nn, optim
        >>> model = nn.Linear(2, 1); opt = optim.SGD(list(model.params()), lr=0.1)
        >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.npz")
        >>> save_checkpoint(capture(model, opt, loop={"epoch": 1}), path)
        >>> load_checkpoint(path)["loop"]
        {'epoch': 1}
    """
    state = load(path, max_bytes=max_bytes)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{os.fspath(path)!r} is not a dualflow training checkpoint")
    return state

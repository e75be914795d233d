"""The training loop: ``Trainer`` runs epochs of steps with metrics, logs, checkpoints and resume.

``fit`` is the one-call front end. A run resumed from a checkpoint continues from the exact batch
it stopped at, with the same parameters, optimizer, scheduler and random state, so it ends with
the same parameters, bit for bit, as the run that was never interrupted. Data-parallel runs
checkpoint from rank 0 and resume every rank's own state (``distributed_checkpoint``).
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from dualflow.training.checkpoint import capture, load_checkpoint, restore, save_checkpoint
from dualflow.training.distributed_checkpoint import (
    is_distributed,
    load_distributed,
    save_distributed,
)
from dualflow.training.jsonl import JsonlLogger
from dualflow.training.metrics import EpochMeter, batch_size_of, count_correct, evaluate
from dualflow.training.progress import format_metrics, progress_bar
from dualflow.training.step import compile_step, make_train_step


def _epoch_batches(loader: Any, epoch: int, start: int) -> Iterator[Any]:
    """The batches of ``epoch`` from batch ``start`` on (a resumable loader is positioned)."""
    size = len(loader) if hasattr(loader, "__len__") else None
    if size is not None and start >= size:
        return iter(())  # a checkpoint taken after the epoch's last step: only its end remains
    if hasattr(loader, "state_dict") and hasattr(loader, "load_state_dict"):
        loader.load_state_dict({**loader.state_dict(), "epoch": epoch, "position": start})
        return iter(loader)
    return itertools.islice(iter(loader), start, None)  # plain iterables: replay and skip


def _learning_rates(optimizer: Any) -> list[float]:
    rates = []
    for group in getattr(optimizer, "param_groups", ()):
        lr = group.get("lr")
        rates.append(float(lr.item()) if hasattr(lr, "item") else float(lr))
    return rates


def _call(callbacks: Sequence[Any], hook: str, info: dict[str, Any]) -> None:
    for callback in callbacks:
        method = getattr(callback, hook, None)
        if method is not None:
            method(info)


class Trainer:
    """Owns one training set-up; ``run(epochs)`` trains and returns the per-epoch history.

    Attributes a callback may read: ``epoch``, ``batch`` (steps done in this epoch),
    ``global_step``, ``history``; setting ``stop_training = True`` ends the run after the
    current epoch. See :func:`fit` for the arguments.
    """

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        loss_fn: Callable[[Any, Any], Any],
        train_loader: Iterable[Any],
        *,
        val_loader: Iterable[Any] | None = None,
        step_fn: Callable[[Any, Any], tuple[Any, Any]] | None = None,
        callbacks: Sequence[Any] = (),
        scheduler: Any = None,
        log_path: str | os.PathLike | None = None,
        checkpoint_path: str | os.PathLike | None = None,
        checkpoint_every: int | None = None,
        progress: bool = True,
        compile: bool = False,
        comm: Any = None,
    ) -> None:
        if checkpoint_every is not None and (checkpoint_path is None or checkpoint_every < 1):
            raise ValueError("checkpoint_every needs a checkpoint_path and must be >= 1")
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.train_loader, self.val_loader = train_loader, val_loader
        self.callbacks, self.scheduler = tuple(callbacks), scheduler
        self.log_path, self.show_progress = log_path, progress
        self.checkpoint_path, self.checkpoint_every = checkpoint_path, checkpoint_every
        step = step_fn or make_train_step(model, optimizer, loss_fn)
        self.step_fn = compile_step(step) if compile else step
        # data-parallel: a multi-node optimizer's communicator unless one is given
        self.comm = comm if comm is not None else getattr(optimizer, "comm", None)
        self.epoch = self.batch = self.global_step = 0
        self.history: list[dict[str, Any]] = []
        self.meter = EpochMeter()
        self.stop_training = False
        self.logger: JsonlLogger | None = None

    # ----- running ---------------------------------------------------------------------------
    def run(self, epochs: int, resume: str | os.PathLike | None = None) -> list[dict[str, Any]]:
        """Train until ``epochs`` epochs are complete (counting those before ``resume``)."""
        if resume is not None:
            self.load(resume)
        if self.log_path is not None:
            self.logger = JsonlLogger(self.log_path, append=resume is not None)
        while self.epoch < epochs and not self.stop_training:
            self._run_epoch(epochs)
        return self.history

    def _run_epoch(self, epochs: int) -> None:
        size = len(self.train_loader) if hasattr(self.train_loader, "__len__") else None
        desc = f"epoch {self.epoch + 1}/{epochs}"
        bar = progress_bar(size, self.batch, desc, self.show_progress)
        started = time.perf_counter()
        try:
            for batch in _epoch_batches(self.train_loader, self.epoch, self.batch):
                self._step(batch)
                bar.set_postfix(refresh=False, **format_metrics(self.meter.summary()))
                bar.update(1)
            record = self._epoch_record(time.perf_counter() - started)
            shown = ("loss", "accuracy", "val_loss", "val_accuracy")
            bar.set_postfix(**format_metrics({k: record.get(k) for k in shown}))
        finally:
            bar.close()  # before callbacks and logs, so their output does not cut the bar
        self._finish_epoch(record)

    def _step(self, batch: Any) -> None:
        inputs, targets = batch
        loss, outputs = self.step_fn(inputs, targets)
        loss_value, n = float(loss.item()), batch_size_of(targets)
        correct = count_correct(outputs, targets)
        self.meter.update(loss_value, correct, n)
        self.batch += 1
        self.global_step += 1
        info = {"trainer": self, "epoch": self.epoch, "batch": self.batch, "step": self.global_step}
        info.update(loss=loss_value, accuracy=None if correct is None else correct / n)
        _call(self.callbacks, "on_step_end", info)
        every = self.checkpoint_every
        if self.checkpoint_path is not None and every and self.global_step % every == 0:
            self.save(self.checkpoint_path)

    def _epoch_record(self, seconds: float) -> dict[str, Any]:
        """The epoch's metrics (validation included); steps the scheduler."""
        record: dict[str, Any] = {"epoch": self.epoch, "step": self.global_step}
        record.update(self.meter.summary())
        if self.val_loader is not None:
            result = evaluate(self.model, self.val_loader, self.loss_fn)
            record.update(val_loss=result.loss, val_accuracy=result.accuracy)
        record.update(lr=_learning_rates(self.optimizer), seconds=seconds)
        record["steps_per_second"] = self.meter.steps / seconds if seconds > 0 else None
        if self.scheduler is not None:
            self.scheduler.step()  # after the record: it shows the lr this epoch trained with
        return record

    def _finish_epoch(self, record: dict[str, Any]) -> None:
        """Keep, log and announce the record; move to the next epoch (and checkpoint there)."""
        self.history.append(record)
        if self.logger is not None:
            self.logger.write({"event": "epoch", **record})
        _call(self.callbacks, "on_epoch_end", {"trainer": self, **record})
        self.epoch, self.batch = self.epoch + 1, 0
        self.meter.reset()
        if self.checkpoint_path is not None and not self.checkpoint_every:
            self.save(self.checkpoint_path)

    # ----- checkpoints -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> str:
        """Checkpoint everything to ``path`` (``{step}``/``{epoch}`` in it are filled in)."""
        target = os.fspath(path).format(step=self.global_step, epoch=self.epoch)
        loop = {"epoch": self.epoch, "batch": self.batch, "global_step": self.global_step}
        loop.update(meter=self.meter.state_dict(), history=self.history)
        state = capture(self.model, self.optimizer, self.scheduler, self.train_loader, loop)
        if is_distributed(self.comm):  # rank 0 writes every rank's part
            save_distributed(state, self.model, self.comm, target)
        else:
            save_checkpoint(state, target)
        if self.logger is not None:
            record = {"event": "checkpoint", "epoch": self.epoch, "batch": self.batch}
            self.logger.write({**record, "step": self.global_step, "path": target})
        return target

    def load(self, path: str | os.PathLike) -> None:
        """Restore a checkpoint written by :meth:`save` (all or nothing)."""
        if is_distributed(self.comm):  # rank 0 reads; each rank takes its own part
            state = load_distributed(path, self.comm)
        else:
            state = load_checkpoint(path)
        loop = restore(state, self.model, self.optimizer, self.scheduler, self.train_loader)
        self.epoch, self.batch = int(loop["epoch"]), int(loop["batch"])
        self.global_step = int(loop["global_step"])
        self.meter.load_state_dict(loop["meter"])
        self.history = [dict(record) for record in loop["history"]]


def fit(
    model: Any,
    optimizer: Any,
    loss_fn: Callable[[Any, Any], Any],
    train_loader: Iterable[Any],
    epochs: int,
    val_loader: Iterable[Any] | None = None,
    step_fn: Callable[[Any, Any], tuple[Any, Any]] | None = None,
    callbacks: Sequence[Any] = (),
    scheduler: Any = None,
    log_path: str | os.PathLike | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: str | os.PathLike | None = None,
    progress: bool = True,
    compile: bool = False,
    comm: Any = None,
) -> list[dict[str, Any]]:
    """Train ``model`` for ``epochs`` epochs of ``(inputs, targets)`` batches.

    Args:
        model: the Module being trained, in its current mode (validation switches it to eval
            and back).
        optimizer: an optimizer over the model's parameters.
        loss_fn: ``loss_fn(outputs, targets)`` returning a scalar (batch-mean) Tensor.
        train_loader: batches; a ``DataLoader`` (or anything with ``state_dict``,
            ``load_state_dict`` and ``len``) is positioned exactly on resume, any other iterable
            is replayed and the batches already done are skipped. Epoch ``e`` of the run
            reads the loader's epoch-``e`` order (``DataLoader.set_epoch`` semantics).
        epochs: the total number of epochs, counting those done before ``resume``.
        val_loader: batches evaluated after every epoch (eval mode, no grad).
        step_fn: ``step(x, y) -> (loss, outputs)``; default ``make_train_step(...)``.
        callbacks: objects with optional ``on_step_end(info)`` / ``on_epoch_end(info)``; ``info``
            is a dict holding the metrics and ``"trainer"`` (set ``stop_training`` to stop).
        scheduler: an lr scheduler stepped after every epoch.
        log_path: a JSON-lines file: one ``"event": "epoch"`` record per epoch and one
            ``"event": "checkpoint"`` record per checkpoint (appended to when resuming).
        checkpoint_path: where checkpoints go (``{step}``/``{epoch}`` in it are filled in).
        checkpoint_every: checkpoint every this many steps; None: after every epoch.
        resume: a checkpoint to continue from: model, optimizer, scheduler, random state,
            loader position, epoch, step, running metrics and history are all restored.
        progress: show a tqdm bar per epoch (loss, accuracy, it/s) when tqdm is installed.
        compile: run the step through ``dualflow.compile`` (after one eager step).
        comm: the communicator of a data-parallel run (default: the optimizer's, for a
            multi-node optimizer). Then rank 0 writes each checkpoint, holding every rank's
            random state, loader position, buffers and metrics, and every rank resumes its own.

    Returns:
        The history: one dict per epoch with ``epoch``, ``step``, ``loss``, ``accuracy`` (None
        unless the outputs are class scores of integer targets), ``val_loss``/``val_accuracy``
        (with a ``val_loader``), ``lr`` (per group, as used this epoch), ``seconds`` and
        ``steps_per_second``.

    Example:
        >>> import numpy as np, dualflow
        >>> from dualflow import nn, ops, optim
        >>> from dualflow.data import DataLoader, TensorDataset
        >>> x = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
        >>> data = DataLoader(TensorDataset(x, (x[:, 0] > 0).astype(np.int64)), batch_size=16)
        >>> model = nn.Linear(3, 2)
        >>> history = fit(model, optim.SGD(list(model.params()), lr=0.5),
        ...               ops.softmax_cross_entropy, data, epochs=3, progress=False)
        >>> len(history), history[-1]["loss"] < history[0]["loss"]
        (3, True)
    """
    trainer = Trainer(
        model,
        optimizer,
        loss_fn,
        train_loader,
        val_loader=val_loader,
        step_fn=step_fn,
        callbacks=callbacks,
        scheduler=scheduler,
        log_path=log_path,
        checkpoint_path=checkpoint_path,
        checkpoint_every=checkpoint_every,
        progress=progress,
        compile=compile,
        comm=comm,
    )
    return trainer.run(epochs, resume=resume)

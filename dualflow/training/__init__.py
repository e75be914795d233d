"""The training loop helper: ``fit``, its ``Trainer``, train steps, metrics and checkpoints.

``fit(model, optimizer, loss_fn, loader, epochs)`` trains with a progress bar, per-epoch
validation, JSON-lines metric logs and checkpoints from which a resumed run continues bit for bit.
"""

from dualflow.training.checkpoint import capture, load_checkpoint, restore, save_checkpoint
from dualflow.training.jsonl import JsonlLogger, read_jsonl
from dualflow.training.loop import Trainer, fit
from dualflow.training.metrics import EpochMeter, Evaluation, accuracy, count_correct, evaluate
from dualflow.training.step import compile_step, make_train_step

__all__ = [
    "EpochMeter",
    "Evaluation",
    "JsonlLogger",
    "Trainer",
    "accuracy",
    "capture",
    "compile_step",
    "count_correct",
    "evaluate",
    "fit",
    "load_checkpoint",
    "make_train_step",
    "read_jsonl",
    "restore",
    "save_checkpoint",
]

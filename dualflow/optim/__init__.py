"""Optimizers, gradient clipping and lr schedulers whose updates are written with ops.

Every update is a set of ``ops.assign`` state writes under ``no_grad()``, so ``@dualflow.compile``
can trace a whole training step, optimizer update included (DESIGN §3).
"""

from dualflow.optim import lr_scheduler
from dualflow.optim.adam import Adam, AdamW
from dualflow.optim.clip import clip_grad_norm
from dualflow.optim.optimizer import Optimizer
from dualflow.optim.rmsprop import RMSprop
from dualflow.optim.sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "RMSprop", "clip_grad_norm", "lr_scheduler"]

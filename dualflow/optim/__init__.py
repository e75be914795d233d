"""Optimizers, gradient clipping and lr schedulers whose updates are written with ops.

Every update is a set of ``ops.assign`` state writes under ``no_grad()``, so ``@dualflow.compile``
can trace a whole training step, optimizer update included (DESIGN §3). Names, arguments,
defaults and state names are PyTorch's (``torch.optim``).

Import cycle: ``optimizer``'s ``load_state_dict`` checks a state's kind with ``state_check``,
whose message names the optimizer classes that would accept it by walking ``Optimizer``'s
subclasses (imported at call time; issue 37, item 5).
"""

from typing import Any

from dualflow.optim import lr_scheduler
from dualflow.optim.adadelta import Adadelta
from dualflow.optim.adagrad import Adagrad
from dualflow.optim.adam import Adam, AdamW
from dualflow.optim.adamax import Adamax
from dualflow.optim.clip import clip_grad_norm
from dualflow.optim.lbfgs import LBFGS
from dualflow.optim.nadam import NAdam
from dualflow.optim.optimizer import Optimizer
from dualflow.optim.radam import RAdam
from dualflow.optim.rmsprop import RMSprop
from dualflow.optim.sgd import SGD
from dualflow.tensor.methods.hints import missing

__all__ = [
    "LBFGS",
    "SGD",
    "Adadelta",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "Optimizer",
    "RAdam",
    "RMSprop",
    "clip_grad_norm",
    "lr_scheduler",
]

# PyTorch optim names dualflow does not have -> what to use instead (AttributeError says so).
_INSTEAD = {
    "SparseAdam": "sparse gradients are not supported: use Adam",
    "ASGD": "not supported: use SGD (with averaging done outside) or Adam",
    "Rprop": "not supported: use RMSprop or Adam",
    "Adafactor": "not supported: use Adam or AdamW",
    "swa_utils": "stochastic weight averaging utilities are not supported",
}


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise missing("module 'dualflow.optim'", f"optim.{name}", name, _INSTEAD, lambda: __all__)

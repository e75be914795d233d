"""``dualflow.nn.utils``: gradient clipping and parameter/vector conversion (PyTorch's names)."""

from typing import Any

from dualflow.nn.utils.clip_grad import (
    clip_grad_norm_,
    clip_grad_value_,
    parameters_to_vector,
    vector_to_parameters,
)
from dualflow.tensor.methods.hints import missing

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]

# PyTorch nn.utils names dualflow does not have -> what to use instead.
_INSTEAD = {
    "rnn": "packed sequences are not supported: pad the batch and mask (or slice) the outputs",
    "weight_norm": "not supported: reparametrize the weight in forward()",
    "spectral_norm": "not supported: reparametrize the weight in forward()",
    "parametrize": "not supported: reparametrize the weight in forward()",
    "prune": "not supported: multiply the weight by a mask in forward()",
    "clip_grad_norm": "use clip_grad_norm_ (PyTorch's deprecated name is gone)",
}


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    subject = "module 'dualflow.nn.utils'"
    raise missing(subject, f"nn.utils.{name}", name, _INSTEAD, lambda: __all__)

"""``dualflow.nn.utils``: gradient clipping and parameter/vector conversion (PyTorch's names)."""

from dualflow.nn.utils.clip_grad import (
    clip_grad_norm_,
    clip_grad_value_,
    parameters_to_vector,
    vector_to_parameters,
)

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]

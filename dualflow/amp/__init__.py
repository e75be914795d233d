"""Automatic mixed precision (PyTorch's ``torch.amp``): ``autocast`` runs the ops of PyTorch's
lists in float16/bfloat16 (matmul, convolution) or float32 (losses...), and ``GradScaler``
scales the loss so small float16 gradients survive, skipping steps whose gradients overflow.
"""

from dualflow.amp.autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from dualflow.amp.grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_enabled"]

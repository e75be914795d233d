"""``clip_grad_norm``: dualflow's original name for ``dualflow.nn.utils.clip_grad_norm_``."""

from __future__ import annotations

from dualflow.nn.utils.clip_grad import clip_grad_norm_ as clip_grad_norm

__all__ = ["clip_grad_norm"]

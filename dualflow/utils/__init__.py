"""``dualflow.utils``: PyTorch's ``torch.utils`` namespace, so ``torch.utils.data.DataLoader``
and ``torch.utils.checkpoint.checkpoint`` port by changing the import. It holds ``data`` (an
alias of ``dualflow.data``) and ``checkpoint`` (activation checkpointing).
"""

from dualflow.utils import checkpoint, data

__all__ = ["checkpoint", "data"]

"""``dualflow.utils``: PyTorch's ``torch.utils`` namespace, so ``torch.utils.data.DataLoader``
ports by changing the import. It holds ``data`` (an alias of ``dualflow.data``) and nothing else.
"""

from dualflow.utils import data

__all__ = ["data"]

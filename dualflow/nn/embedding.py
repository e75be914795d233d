"""``Embedding``: a lookup table of ``num_embeddings`` vectors, initialized N(0, 1) as PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow import arguments, ops
from dualflow._config import no_grad
from dualflow.nn import init
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor


def pretrained(name: str, embeddings: Any, max_norm: Any, scale_grad_by_freq: bool) -> Any:
    """The checked 2-D array of ``from_pretrained`` (its options dualflow lacks refused)."""
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError(f"{name}.from_pretrained: max_norm and scale_grad_by_freq")
    weight = embeddings.detach() if isinstance(embeddings, Tensor) else np.asarray(embeddings)
    if len(weight.shape) != 2:
        raise ValueError(
            f"Embeddings parameter is expected to be 2-dimensional, got {weight.shape}"
        )
    return weight


class Embedding(Module):
    """Map integer ids of any shape to rows of ``weight`` (num_embeddings, embedding_dim).

    With ``padding_idx`` that row starts at zero and receives no gradient (as PyTorch).

    Example:
        >>> import numpy as np
        >>> emb = Embedding(10, 3)
        >>> emb
        Embedding(10, 3)
        >>> emb(np.array([[1, 2], [3, 4]])).shape
        (2, 2, 3)
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.num_embeddings = arguments.integer("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = arguments.integer("Embedding", "embedding_dim", embedding_dim)
        if padding_idx is not None:
            padding_idx = arguments.integer("Embedding", "padding_idx", padding_idx, None)
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise arguments.fail(
                    "Embedding", "padding_idx", padding_idx, "must be within num_embeddings"
                )
            padding_idx %= self.num_embeddings
        self.padding_idx = padding_idx
        shape = (self.num_embeddings, self.embedding_dim)
        self.weight = init.empty_parameter(shape, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight ~ N(0, 1); the padding row (if any) zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                ops.assign(self.weight, self.weight * self._keep_rows())

    def _keep_rows(self) -> Any:
        # (V, 1) mask: 0 on the padding row, 1 elsewhere.
        keep = np.ones((self.num_embeddings, 1), self.weight.dtype)
        keep[self.padding_idx] = 0
        return self.weight.device.xp.asarray(keep)

    def forward(self, ids: Any) -> Tensor:
        """Look up ``weight[ids]``."""
        weight = self.weight
        if self.padding_idx is not None:  # same values, but no gradient into the padding row
            keep = self._keep_rows()
            weight = weight * keep + ops.stop_gradient(weight) * (1 - keep)
        return ops.embedding(ids, weight)

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Any,
        freeze: bool = True,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
    ) -> Embedding:
        """An Embedding whose weight is (a copy of) the 2-D ``embeddings``, frozen unless
        ``freeze=False``, as PyTorch's.

        Example:
            >>> import numpy as np
            >>> emb = Embedding.from_pretrained(np.eye(3, dtype=np.float32))
            >>> emb.weight.requires_grad, emb(np.array([2])).tolist()
            (False, [[0.0, 0.0, 1.0]])
        """
        weight = pretrained("Embedding", embeddings, max_norm, scale_grad_by_freq)
        module = cls(weight.shape[0], weight.shape[1], padding_idx, dtype=weight.dtype)
        with no_grad():
            ops.assign(module.weight, weight)
        module.weight.requires_grad_(not freeze)
        return module

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"

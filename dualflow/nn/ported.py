"""Layers with PyTorch's names, arguments and initialization that ports meet: ``PReLU``,
``EmbeddingBag`` and ``DataParallel`` (an identity wrapper: dualflow trains one device per
process, and multi-device training is ``dualflow.distributed``).
"""

from __future__ import annotations

from typing import Any

from dualflow import arguments, ops
from dualflow._config import no_grad
from dualflow.nn import init
from dualflow.nn.embedding import pretrained
from dualflow.nn.functional.ported import embedding_bag, prelu
from dualflow.nn.init import constant_, empty_parameter
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor


class PReLU(Module):
    """``x`` where positive, else ``weight * x``, with a learned slope (one, or one per
    channel with ``num_parameters=C``), initialized to ``init``.

    Example:
        >>> import dualflow
        >>> act = PReLU()
        >>> act, act(dualflow.tensor([-1.0, 2.0])).tolist()
        (PReLU(num_parameters=1), [-0.25, 2.0])
    """

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        self.num_parameters = arguments.integer("PReLU", "num_parameters", num_parameters)
        self.init = float(init)
        self.weight = empty_parameter((self.num_parameters,), dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every slope back to ``init``."""
        constant_(self.weight, self.init)

    def forward(self, input: Any) -> Tensor:
        """PReLU of ``input`` (channels on dim 1)."""
        return prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embeddings (``weight`` ~ N(0, 1), as PyTorch).

    ``forward(input, offsets=None, per_sample_weights=None)``: a 2-D ``input`` holds one bag per
    row; a 1-D ``input`` is cut into bags starting at ``offsets``.

    Example:
        >>> import dualflow
        >>> bag = EmbeddingBag(10, 3, mode="sum")
        >>> bag
        EmbeddingBag(10, 3, mode='sum')
        >>> bag(dualflow.tensor([1, 2, 4, 5]), dualflow.tensor([0, 2])).shape
        (2, 3)
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Any = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if max_norm is not None or scale_grad_by_freq:
            raise NotImplementedError("EmbeddingBag: max_norm and scale_grad_by_freq")
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode {mode!r} is not one of 'sum', 'mean', 'max'")
        self.num_embeddings = arguments.integer("EmbeddingBag", "num_embeddings", num_embeddings)
        self.embedding_dim = arguments.integer("EmbeddingBag", "embedding_dim", embedding_dim)
        if padding_idx is not None:
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError("EmbeddingBag: padding_idx must be within num_embeddings")
            padding_idx %= self.num_embeddings
        self.mode, self.padding_idx = mode, padding_idx
        self.include_last_offset, self.sparse = bool(include_last_offset), bool(sparse)
        shape = (self.num_embeddings, self.embedding_dim)
        self.weight = init.empty_parameter(shape, dtype, device)
        if _weight is None:
            self.reset_parameters()
        else:
            with no_grad():
                ops.assign(self.weight, _weight)

    def reset_parameters(self) -> None:
        """Weight ~ N(0, 1); the padding row (if any) zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Any,
        freeze: bool = True,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> EmbeddingBag:
        """An EmbeddingBag whose weight is the 2-D ``embeddings``, frozen unless
        ``freeze=False``, as PyTorch's.

        Example:
            >>> import dualflow
            >>> bag = EmbeddingBag.from_pretrained(dualflow.eye(3), mode="sum")
            >>> bag(dualflow.tensor([[0, 2]])).tolist(), bag.weight.requires_grad
            ([[1.0, 0.0, 1.0]], False)
        """
        weight = pretrained("EmbeddingBag", embeddings, max_norm, scale_grad_by_freq)
        module = cls(
            weight.shape[0],
            weight.shape[1],
            mode=mode,
            sparse=sparse,
            _weight=weight,
            include_last_offset=include_last_offset,
            padding_idx=padding_idx,
            dtype=weight.dtype,
        )
        module.weight.requires_grad_(not freeze)
        return module

    def forward(self, input: Any, offsets: Any = None, per_sample_weights: Any = None) -> Tensor:
        """One reduced embedding per bag: shape (bags, embedding_dim)."""
        return embedding_bag(
            input,
            self.weight,
            offsets,
            mode=self.mode,
            per_sample_weights=per_sample_weights,
            include_last_offset=self.include_last_offset,
            padding_idx=self.padding_idx,
        )

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text


class DataParallel(Module):
    """PyTorch's ``nn.DataParallel`` on the one device dualflow computes on: ``forward`` is the
    wrapped ``module``'s, and the state dict's keys start with ``module.``, as PyTorch's.

    For several devices or nodes use ``dualflow.distributed`` (one process per device).

    Example:
        >>> import dualflow
        >>> net = DataParallel(dualflow.nn.Linear(2, 1))
        >>> sorted(net.state_dict()), net(dualflow.ones(3, 2)).shape
        (['module.bias', 'module.weight'], (3, 1))
    """

    def __init__(
        self, module: Module, device_ids: Any = None, output_device: Any = None, dim: int = 0
    ) -> None:
        super().__init__()
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """The wrapped module's forward."""
        return self.module(*inputs, **kwargs)


PORTED_LAYERS = (PReLU, EmbeddingBag, DataParallel)

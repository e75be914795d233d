"""Loss modules with PyTorch's constructors: CrossEntropyLoss, NLLLoss, BCELoss,
BCEWithLogitsLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, KLDivLoss.

Each keeps its options (and ``weight``/``pos_weight`` as buffers, so ``state_dict`` matches
PyTorch's) and calls the function of the same name in ``dualflow.nn.functional``.
"""

from __future__ import annotations

from typing import Any

from dualflow import arguments
from dualflow.nn import functional as F
from dualflow.nn.functional.loss import reduction_mode
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor, as_tensor


class _Loss(Module):
    """Shared constructor: PyTorch's legacy ``size_average``/``reduce`` become ``reduction``."""

    _name = "loss"

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction_mode(self._name, size_average, reduce, reduction)

    def _buffer(self, name: str, value: Any) -> None:
        # A registered buffer, as in PyTorch: in the state dict when given (None is skipped).
        self.register_buffer(name, None if value is None else as_tensor(value))


class _WeightedLoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self._buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """``F.cross_entropy`` with the options fixed at construction.

    Example:
        >>> loss = CrossEntropyLoss(ignore_index=-1, label_smoothing=0.1)
        >>> loss
        CrossEntropyLoss()
        >>> round(loss(as_tensor([[0.0, 0.0]]), as_tensor([1])).item(), 4)
        0.6931
    """

    _name = "cross_entropy"

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:  # fmt: skip
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = arguments.integer(
            type(self).__name__, "ignore_index", ignore_index, None
        )
        self.label_smoothing = arguments.real(
            "CrossEntropyLoss", "label_smoothing", label_smoothing, 0.0, 1.0
        )

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss of logits ``input`` against ``target``."""
        return F.cross_entropy(
            input, target, self.weight, ignore_index=self.ignore_index,
            reduction=self.reduction, label_smoothing=self.label_smoothing,
        )  # fmt: skip


class NLLLoss(_WeightedLoss):
    """``F.nll_loss`` as a module.

    Example:
        >>> round(NLLLoss()(as_tensor([[-1.0, -2.0]]), as_tensor([1])).item(), 4)
        2.0
    """

    _name = "nll_loss"

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean") -> None:  # fmt: skip
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = arguments.integer("NLLLoss", "ignore_index", ignore_index, None)

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss of log-probabilities ``input`` against ``target``."""
        return F.nll_loss(
            input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction
        )


class BCELoss(_WeightedLoss):
    """``F.binary_cross_entropy`` as a module.

    Example:
        >>> round(BCELoss()(as_tensor([0.5]), as_tensor([1.0])).item(), 4)
        0.6931
    """

    _name = "binary_cross_entropy"

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss of probabilities ``input`` against float ``target``."""
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """``F.binary_cross_entropy_with_logits`` as a module (``weight``, ``pos_weight``).

    Example:
        >>> loss = BCEWithLogitsLoss(pos_weight=as_tensor([2.0]))
        >>> round(loss(as_tensor([0.0]), as_tensor([1.0])).item(), 4), list(loss.state_dict())
        (1.3863, ['pos_weight'])
    """

    _name = "binary_cross_entropy_with_logits"

    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean", pos_weight: Any = None) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self._buffer("weight", weight)
        self._buffer("pos_weight", pos_weight)

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss of logits ``input`` against float ``target``."""
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )


class MSELoss(_Loss):
    """``F.mse_loss`` as a module.

    Example:
        >>> MSELoss()(as_tensor([1.0, 2.0]), as_tensor([0.0, 4.0])).item()
        2.5
    """

    _name = "mse_loss"

    def forward(self, input: Any, target: Any) -> Tensor:
        """The squared-error loss."""
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """``F.l1_loss`` as a module.

    Example:
        >>> L1Loss(reduction="sum")(as_tensor([1.0, 2.0]), as_tensor([0.0, 4.0])).item()
        3.0
    """

    _name = "l1_loss"

    def forward(self, input: Any, target: Any) -> Tensor:
        """The absolute-error loss."""
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """``F.smooth_l1_loss`` as a module.

    Example:
        >>> SmoothL1Loss(beta=2.0)(as_tensor([1.0]), as_tensor([0.0])).item()
        0.25
    """

    _name = "smooth_l1_loss"

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.beta = arguments.real("SmoothL1Loss", "beta", beta, 0.0)

    def forward(self, input: Any, target: Any) -> Tensor:
        """The smooth-L1 loss."""
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """``F.huber_loss`` as a module.

    Example:
        >>> HuberLoss(delta=0.5)(as_tensor([2.0]), as_tensor([0.0])).item()
        0.875
    """

    _name = "huber_loss"

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(None, None, reduction)
        self.delta = arguments.real("HuberLoss", "delta", delta, 0.0, open_low=True)

    def forward(self, input: Any, target: Any) -> Tensor:
        """The Huber loss."""
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """``F.kl_div`` as a module (``reduction="batchmean"`` for the true KL divergence).

    Example:
        >>> KLDivLoss(reduction="sum")(as_tensor([0.0]), as_tensor([1.0])).item()
        0.0
    """

    _name = "kl_div"

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 log_target: bool = False) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.log_target = bool(log_target)

    def forward(self, input: Any, target: Any) -> Tensor:
        """The KL divergence of log-probabilities ``input`` from ``target``."""
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)

"""``Linear``: the fully connected layer ``y = x W^T + b`` with PyTorch's layout and default init.

The weight is (out_features, in_features), so a PyTorch state dict loads by name unchanged.
"""

from __future__ import annotations

from typing import Any

from dualflow import arguments, ops
from dualflow.nn import init
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor


class Linear(Module):
    """Affine map over the last axis: ``x @ weight.T + bias``.

    Default init as PyTorch: weight ~ kaiming_uniform(a=√5) = U(±1/√in), bias ~ U(±1/√in).

    Args:
        in_features: size of the last input axis.
        out_features: size of the last output axis.
        bias: whether to learn an additive bias.
        device: where the parameters live (CPU by default).
        dtype: parameter dtype (float32 by default).

    Example:
        >>> import dualflow
        >>> layer = Linear(3, 2)
        >>> layer
        Linear(in_features=3, out_features=2, bias=True)
        >>> layer(dualflow.tensor([[1.0, 2.0, 3.0]])).shape
        (1, 2)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in_features = arguments.integer("Linear", "in_features", in_features)
        self.out_features = arguments.integer("Linear", "out_features", out_features)
        self.weight = init.empty_parameter((self.out_features, self.in_features), dtype, device)
        self.bias = init.empty_parameter((self.out_features,), dtype, device) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw the parameters with PyTorch's default init (from the default generator)."""
        init.linear_default_(self.weight, self.bias)

    def forward(self, x: Any) -> Tensor:
        """``x`` (..., in_features) -> (..., out_features)."""
        return ops.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )

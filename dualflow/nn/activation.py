"""Activation layers (``ReLU``, ``GELU``, ``Softmax``...): modules that call one op each.

``inplace=`` is accepted where PyTorch has it, for compatibility; results are always new tensors.
"""

from __future__ import annotations

import warnings
from typing import Any

from dualflow import arguments, ops
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor


class _Elementwise(Module):
    """An activation without parameters; subclasses define ``forward``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Elementwise):
    """``max(x, 0)``.

    Example:
        >>> ReLU()([-1.0, 2.0]).tolist()
        [0.0, 2.0]
    """

    def forward(self, x: Any) -> Tensor:
        """Apply the activation."""
        return ops.relu(x)


class SiLU(_Elementwise):
    """``x * sigmoid(x)`` (swish).

    Example:
        >>> round(SiLU()([1.0]).tolist()[0], 4)
        0.7311
    """

    def forward(self, x: Any) -> Tensor:
        """Apply the activation."""
        return ops.silu(x)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``.

    Example:
        >>> Sigmoid()([0.0]).tolist()
        [0.5]
    """

    def forward(self, x: Any) -> Tensor:
        """Apply the activation."""
        return ops.sigmoid(x)


class Tanh(Module):
    """Hyperbolic tangent.

    Example:
        >>> Tanh()([0.0]).tolist()
        [0.0]
    """

    def forward(self, x: Any) -> Tensor:
        """Apply the activation."""
        return ops.tanh(x)


class LeakyReLU(_Elementwise):
    """``x`` for ``x > 0``, else ``negative_slope * x`` (PyTorch's default slope 0.01).

    Example:
        >>> LeakyReLU()
        LeakyReLU(negative_slope=0.01)
        >>> LeakyReLU(0.1)([-2.0, 3.0]).tolist()
        [-0.2, 3.0]
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.negative_slope = arguments.real("LeakyReLU", "negative_slope", negative_slope)

    def forward(self, x: Any) -> Tensor:
        """Apply the activation."""
        return ops.leaky_relu(x, slope=self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" * self.inplace)


class ELU(_Elementwise):
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``.

    Example:
        >>> ELU()([0.0, 1.0]).tolist()
        [0.0, 1.0]
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.alpha = arguments.real("ELU", "alpha", alpha)

    def forward(self, x: Any) -> Tensor:
        """Apply the activation."""
        return ops.elu(x, alpha=self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" * self.inplace)


class GELU(Module):
    """Gaussian error linear unit; ``approximate="tanh"`` uses the tanh form.

    Example:
        >>> GELU(approximate="tanh")
        GELU(approximate='tanh')
        >>> round(GELU()([1.0]).tolist()[0], 4)
        0.8413
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = arguments.choice("GELU", "approximate", approximate, ("none", "tanh"))

    def forward(self, x: Any) -> Tensor:
        """Apply the activation."""
        return ops.gelu(x, approximate=self.approximate == "tanh")

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``.

    Example:
        >>> [round(v, 4) for v in Softplus()([0.0, 30.0]).tolist()]
        [0.6931, 30.0]
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = arguments.real("Softplus", "beta", beta)
        if self.beta == 0.0:  # the output is divided by beta
            raise arguments.fail("Softplus", "beta", beta, "must not be 0")
        self.threshold = arguments.real("Softplus", "threshold", threshold)

    def forward(self, x: Any) -> Tensor:
        """Apply the activation."""
        scaled = ops.multiply(x, self.beta) if self.beta != 1.0 else x
        soft = ops.softplus(scaled)
        if self.beta != 1.0:
            soft = soft / self.beta
        return ops.where(ops.greater(scaled, self.threshold), x, soft)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


def _implicit_dim(name: str, ndim: int) -> int:
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
        "dim=X as an argument.",
        stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


def _dim(owner: str, dim: Any) -> int | None:
    return None if dim is None else arguments.integer(owner, "dim", dim, minimum=None)


class Softmax(Module):
    """Softmax along ``dim`` (None: PyTorch's deprecated implicit choice, with a warning).

    Example:
        >>> Softmax(dim=-1)([[0.0, 0.0]]).tolist()
        [[0.5, 0.5]]
    """

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = _dim("Softmax", dim)

    def forward(self, x: Any) -> Tensor:
        """Apply softmax along ``dim``."""
        dim = self.dim if self.dim is not None else _implicit_dim("softmax", len(x.shape))
        return ops.softmax(x, axis=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim`` (None: PyTorch's deprecated implicit choice, with a warning).

    Example:
        >>> round(LogSoftmax(dim=1)([[0.0, 0.0]]).tolist()[0][0], 4)
        -0.6931
    """

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = _dim("LogSoftmax", dim)

    def forward(self, x: Any) -> Tensor:
        """Apply log-softmax along ``dim``."""
        dim = self.dim if self.dim is not None else _implicit_dim("log_softmax", len(x.shape))
        return ops.log_softmax(x, axis=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"

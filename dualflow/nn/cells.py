"""Recurrent cells ``RNNCell``, ``GRUCell`` and ``LSTMCell``, and the one-step update of each.

PyTorch's parameter names, layouts and init: ``weight_ih`` (G*H, in), ``weight_hh`` (G*H, H),
``bias_ih``, ``bias_hh`` (G*H) with G = 1, 3 (gates r, z, n) or 4 (gates i, f, g, o), all
U(±1/√H). Everything is written with ops, so it is differentiable to any order and traceable.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from dualflow import ops
from dualflow.device import device_of
from dualflow.errors import ShapeError
from dualflow.nn import init
from dualflow.nn.module import Module
from dualflow.ops.validate import require_same_float
from dualflow.tensor.core import Tensor

State = tuple[Any, Any]
_ACTIVATIONS = {"tanh": ops.tanh, "relu": ops.relu}


def lstm_step(gates: Any, c: Any) -> tuple[Tensor, Tensor]:
    """One LSTM update from pre-activations ``gates`` (N, 4H) [i, f, g, o] and cell ``c``.

    ``c' = σ(f) c + σ(i) tanh(g)``, ``h' = σ(o) tanh(c')``; returns ``(h', c')``.

    Example:
        >>> import numpy as np
        >>> h, c = lstm_step(np.zeros((1, 8)), np.ones((1, 2)))
        >>> c.tolist(), [round(v, 4) for v in h.tolist()[0]]
        ([[0.5, 0.5]], [0.2311, 0.2311])
    """
    i, f, g, o = ops.split(gates, 4, axis=-1)
    c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
    return ops.sigmoid(o) * ops.tanh(c), c


def gru_step(x_gates: Any, h_gates: Any, h: Any) -> Tensor:
    """One GRU update from the input and hidden projections (each (N, 3H), [r, z, n]).

    ``r = σ(x_r + h_r)``, ``z = σ(x_z + h_z)``, ``n = tanh(x_n + r h_n)``, ``h' = n + z (h - n)``.

    Example:
        >>> import numpy as np
        >>> gru_step(np.zeros((1, 3)), np.zeros((1, 3)), np.ones((1, 1))).tolist()
        [[0.5]]
    """
    x_r, x_z, x_n = ops.split(x_gates, 3, axis=-1)
    h_r, h_z, h_n = ops.split(h_gates, 3, axis=-1)
    r = ops.sigmoid(x_r + h_r)
    z = ops.sigmoid(x_z + h_z)
    n = ops.tanh(x_n + r * h_n)
    return n + z * (h - n)


def zeros_state(like: Any, shape: tuple[int, ...]) -> Any:
    """A zero array of ``shape`` on ``like``'s device, in its dtype (initial hidden states)."""
    device = like.device if isinstance(like, Tensor) else device_of(like)
    return device.xp.zeros(shape, like.dtype)


def check_features(name: str, x: Any, size: int, ranks: tuple[int, ...]) -> None:
    """ShapeError unless ``x`` has one of ``ranks`` and its last axis is ``size``."""
    shape = tuple(x.shape)
    if len(shape) not in ranks or shape[-1] != size:
        ranks_text = " or ".join(f"{r}-D" for r in ranks)
        raise ShapeError(
            f"{name}: expected a {ranks_text} input whose last axis is input_size={size}, got "
            f"shape {shape}"
        )


def check_dtypes(
    name: str, x: Any, hx: Any, weight: Any, weight_name: str, states: tuple = ("hx", "cx")
) -> None:
    """DTypeError (at the user's line) when the input or a hidden state is another float dtype
    than the weights: PyTorch refuses it, and the GEMMs would otherwise silently upcast."""
    require_same_float(name, x, weight, "input", weight_name)
    given = hx if isinstance(hx, tuple | list) else () if hx is None else (hx,)
    for state_name, state in zip(states, given):
        require_same_float(name, state, weight, state_name, weight_name)


def check_sizes(name: str, **sizes: Any) -> None:
    """ValueError naming the first size argument that is not a positive integer."""
    for key, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
            raise ValueError(f"{name}: {key} must be a positive integer, got {value!r}")


def check_nonlinearity(name: str, nonlinearity: str) -> None:
    """ValueError unless ``nonlinearity`` is 'tanh' or 'relu'."""
    if nonlinearity not in _ACTIVATIONS:
        raise ValueError(f"{name}: unknown nonlinearity {nonlinearity!r} (use 'tanh' or 'relu')")


class _Cell(Module):
    """Shared parameters, init and input handling of the three cells."""

    _gates = 1

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool, device: Any, dtype: Any
    ) -> None:
        super().__init__()
        check_sizes(type(self).__name__, input_size=input_size, hidden_size=hidden_size)
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.bias = bool(bias)
        rows = self._gates * self.hidden_size
        self.weight_ih = init.empty_parameter((rows, self.input_size), dtype, device)
        self.weight_hh = init.empty_parameter((rows, self.hidden_size), dtype, device)
        if bias:
            self.bias_ih = init.empty_parameter((rows,), dtype, device)
            self.bias_hh = init.empty_parameter((rows,), dtype, device)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every parameter ~ U(±1/√hidden_size)."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _batched(self, x: Any, hx: Any, n_states: int) -> tuple[Any, list, bool]:
        """``x`` as (N, in) and the states as (N, H) arrays (zeros when ``hx`` is None)."""
        name = type(self).__name__
        check_features(name, x, self.input_size, (1, 2))
        check_dtypes(name, x, hx, self.weight_ih, "weight_ih")
        batched = len(x.shape) == 2
        if not batched:
            x = ops.expand_dims(x, 0)
        if hx is None:
            zeros = zeros_state(x, (x.shape[0], self.hidden_size))
            return x, [zeros] * n_states, batched
        states = list(hx) if n_states > 1 else [hx]
        if not batched:
            states = [ops.expand_dims(s, 0) for s in states]
        for s in states:
            if tuple(s.shape) != (x.shape[0], self.hidden_size):
                raise ShapeError(
                    f"{name}: expected a hidden state of shape {(x.shape[0], self.hidden_size)}, "
                    f"got {tuple(s.shape)}"
                )
        return x, states, batched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(_Cell):
    """An Elman cell: ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (act: tanh or relu).

    Example:
        >>> import numpy as np
        >>> cell = RNNCell(3, 2, nonlinearity="relu")
        >>> cell, cell(np.zeros((4, 3), np.float32)).shape
        (RNNCell(3, 2, nonlinearity=relu), (4, 2))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        check_nonlinearity("RNNCell", nonlinearity)
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, x: Any, hx: Any = None) -> Tensor:
        """Advance ``hx`` (N, H) (or (H,) unbatched; zeros when None) by input ``x``."""
        x, (h,), batched = self._batched(x, hx, 1)
        pre = ops.linear(x, self.weight_ih, self.bias_ih) + ops.linear(
            h, self.weight_hh, self.bias_hh
        )
        h = _ACTIVATIONS[self.nonlinearity](pre)
        return h if batched else ops.squeeze(h, 0)


class GRUCell(_Cell):
    """A gated recurrent unit step (see ``gru_step``): ``h' = cell(x, h)``.

    Example:
        >>> import numpy as np
        >>> cell = GRUCell(3, 2)
        >>> cell, cell(np.zeros((4, 3), np.float32)).shape
        (GRUCell(3, 2), (4, 2))
    """

    _gates = 3

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, x: Any, hx: Any = None) -> Tensor:
        """Advance ``hx`` (N, H) (or (H,) unbatched; zeros when None) by input ``x``."""
        x, (h,), batched = self._batched(x, hx, 1)
        x_gates = ops.linear(x, self.weight_ih, self.bias_ih)
        h = gru_step(x_gates, ops.linear(h, self.weight_hh, self.bias_hh), h)
        return h if batched else ops.squeeze(h, 0)


class LSTMCell(_Cell):
    """One LSTM step: ``(h', c') = cell(x, (h, c))`` with x (N, input_size) or (input_size,).

    Example:
        >>> import numpy as np
        >>> cell = LSTMCell(3, 2)
        >>> h, c = cell(np.zeros((4, 3), np.float32))
        >>> cell, h.shape, c.shape
        (LSTMCell(3, 2), (4, 2), (4, 2))
    """

    _gates = 4

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, x: Any, hx: State | None = None) -> tuple[Tensor, Tensor]:
        """Advance the state ``hx`` = (h, c), each (N, H) (or (H,) unbatched), by input ``x``."""
        x, (h, c), batched = self._batched(x, hx, 2)
        gates = ops.linear(x, self.weight_ih, self.bias_ih) + ops.linear(
            h, self.weight_hh, self.bias_hh
        )
        h, c = lstm_step(gates, c)
        return (h, c) if batched else (ops.squeeze(h, 0), ops.squeeze(c, 0))

"""Recurrent layers ``LSTMCell`` and ``LSTM`` with PyTorch's parameter names, layout and init.

Gates are ordered i, f, g, o along the 4H axis of ``weight_ih``/``weight_hh``. Everything is
written with ops (matmul, split, sigmoid, tanh, stack), so it is differentiable to any order.
"""

from __future__ import annotations

import math
from typing import Any

from dualflow import ops
from dualflow._config import config
from dualflow.device import device_of
from dualflow.errors import ShapeError
from dualflow.nn import init
from dualflow.nn.module import Module
from dualflow.tensor import Tensor

State = tuple[Any, Any]


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


def _zeros(like: Any, shape: tuple[int, ...]) -> Any:
    device = like.device if isinstance(like, Tensor) else device_of(like)
    return device.xp.zeros(shape, like.dtype)


def _check_features(name: str, x: Any, size: int, ranks: tuple[int, ...]) -> None:
    shape = tuple(x.shape)
    if len(shape) not in ranks or shape[-1] != size:
        ranks_text = " or ".join(f"{r}-D" for r in ranks)
        raise ShapeError(
            f"{name}: expected a {ranks_text} input whose last axis is input_size={size}, got "
            f"shape {shape}"
        )


class LSTMCell(Module):
    """One LSTM step: ``(h', c') = cell(x, (h, c))`` with x (N, input_size) or (input_size,).

    Parameters ``weight_ih`` (4H, in), ``weight_hh`` (4H, H), ``bias_ih``, ``bias_hh`` (4H), all
    initialized U(±1/√H) as PyTorch; ``hx=None`` starts from zeros.

    Example:
        >>> import numpy as np
        >>> cell = LSTMCell(3, 2)
        >>> h, c = cell(np.zeros((4, 3), np.float32))
        >>> cell, h.shape, c.shape
        (LSTMCell(3, 2), (4, 2), (4, 2))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = int(input_size), int(hidden_size), bias
        gates = 4 * self.hidden_size
        self.weight_ih = init.empty_parameter((gates, self.input_size), dtype, device)
        self.weight_hh = init.empty_parameter((gates, self.hidden_size), dtype, device)
        self.bias_ih = init.empty_parameter((gates,), dtype, device) if bias else None
        self.bias_hh = init.empty_parameter((gates,), dtype, device) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every parameter ~ U(±1/√hidden_size)."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.params():
            init.uniform_(p, -bound, bound)

    def forward(self, x: Any, hx: State | None = None) -> tuple[Tensor, Tensor]:
        """Advance the state ``hx`` = (h, c), each (N, H) (or (H,) unbatched), by input ``x``."""
        _check_features("LSTMCell", x, self.input_size, (1, 2))
        batched = len(x.shape) == 2
        if not batched:
            x = ops.expand_dims(x, 0)
        if hx is None:
            h = c = _zeros(x, (x.shape[0], self.hidden_size))
        else:
            h, c = hx if batched else (ops.expand_dims(s, 0) for s in hx)
        gates = ops.linear(x, self.weight_ih, self.bias_ih) + ops.linear(
            h, self.weight_hh, self.bias_hh
        )
        h, c = lstm_step(gates, c)
        return (h, c) if batched else (ops.squeeze(h, 0), ops.squeeze(c, 0))

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        return s if self.bias else s + ", bias=False"


class LSTM(Module):
    """Multi-layer LSTM over a sequence: ``output, (h_n, c_n) = lstm(x, (h_0, c_0))``.

    x is (L, N, input_size) (``batch_first``: (N, L, input_size)) or unbatched (L, input_size);
    output is (L, N, D*H) and h_n, c_n are (num_layers*D, N, H) with D = 2 if bidirectional.
    Parameters per layer k (suffix ``_reverse`` for the backward direction): ``weight_ih_l{k}``
    (4H, in_k), ``weight_hh_l{k}`` (4H, H), ``bias_ih_l{k}``, ``bias_hh_l{k}`` (4H), all
    U(±1/√H). ``dropout`` applies to the outputs of every layer but the last, in training.

    Example:
        >>> import numpy as np
        >>> lstm = LSTM(3, 4, num_layers=2)
        >>> out, (h, c) = lstm(np.zeros((5, 2, 3), np.float32))
        >>> lstm, out.shape, h.shape, c.shape
        (LSTM(3, 4, num_layers=2), (5, 2, 4), (2, 2, 4), (2, 2, 4))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if proj_size:
            raise NotImplementedError("LSTM: proj_size is not supported")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout should be a number in range [0, 1], got {dropout}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError("hidden_size and num_layers must be greater than 0")
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.bias, self.batch_first = int(num_layers), bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        self.num_directions = 2 if bidirectional else 1
        gates = 4 * self.hidden_size
        for layer in range(self.num_layers):
            width = self.input_size if layer == 0 else self.hidden_size * self.num_directions
            for suffix in ("", "_reverse")[: self.num_directions]:
                shapes = {"weight_ih": (gates, width), "weight_hh": (gates, self.hidden_size)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                for name, shape in shapes.items():
                    param = init.empty_parameter(shape, dtype, device)
                    setattr(self, f"{name}_l{layer}{suffix}", param)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every parameter ~ U(±1/√hidden_size)."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.params():
            init.uniform_(p, -bound, bound)

    def _weights(self, layer: int, direction: int) -> tuple[Any, Any, Any, Any]:
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        return tuple(getattr(self, name + suffix, None) for name in names)  # type: ignore[return-value]

    def _run_direction(
        self, x: Any, state: State, weights: tuple, reverse: bool
    ) -> tuple[Tensor, Tensor, Tensor]:
        w_ih, w_hh, b_ih, b_hh = weights
        xw = ops.matmul(x, ops.transpose(w_ih))  # every step's input projection in one GEMM
        if b_ih is not None:
            xw = xw + (b_ih + b_hh)
        w_hh_t = ops.transpose(w_hh)
        h, c = state
        steps = range(x.shape[0])
        outs: list[Any] = [None] * len(steps)
        for t in reversed(steps) if reverse else steps:
            h, c = lstm_step(xw[t] + ops.matmul(h, w_hh_t), c)
            outs[t] = h
        return ops.stack(outs, 0), h, c

    def _initial_states(self, x: Any, hx: State | None, batched: bool) -> list[State]:
        n_states, n = self.num_layers * self.num_directions, x.shape[1]
        if hx is None:
            zeros = _zeros(x, (n, self.hidden_size))
            return [(zeros, zeros)] * n_states
        h0, c0 = hx if batched else (ops.expand_dims(s, 1) for s in hx)
        expected = (n_states, n, self.hidden_size)
        for name, s in (("h_0", h0), ("c_0", c0)):
            if tuple(s.shape) != expected:
                raise ShapeError(f"LSTM: expected {name} of shape {expected}, got {s.shape}")
        return [(h0[k], c0[k]) for k in range(n_states)]

    def forward(self, x: Any, hx: State | None = None) -> tuple[Tensor, State]:
        """Run the sequence ``x`` from state ``hx`` = (h_0, c_0) (zeros when None)."""
        _check_features("LSTM", x, self.input_size, (2, 3))
        batched = len(x.shape) == 3
        if not batched:
            x = ops.expand_dims(x, 1)
        elif self.batch_first:
            x = ops.transpose(x, (1, 0, 2))
        states = self._initial_states(x, hx, batched)
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(self.num_directions):
                state = states[layer * self.num_directions + d]
                out, h, c = self._run_direction(x, state, self._weights(layer, d), d == 1)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if len(outs) == 1 else ops.concat(outs, axis=2)
            if self.dropout and layer < self.num_layers - 1:
                x = ops.dropout(x, self.dropout, train=self.training and config.train)
        h_n, c_n = ops.stack(h_n, 0), ops.stack(c_n, 0)
        if not batched:
            return ops.squeeze(x, 1), (ops.squeeze(h_n, 1), ops.squeeze(c_n, 1))
        return (ops.transpose(x, (1, 0, 2)) if self.batch_first else x), (h_n, c_n)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

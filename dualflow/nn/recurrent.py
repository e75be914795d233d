"""Multi-layer recurrent layers ``RNN``, ``GRU`` and ``LSTM`` with PyTorch's names, layout, init.

Parameters per layer k (suffix ``_reverse`` for the backward direction): ``weight_ih_l{k}``,
``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``, as the cells (``dualflow.nn.cells``). Every
step's input projection is one GEMM over the whole sequence; the loop is written with ops, so it
is differentiable to any order and traces into one graph (LSTM's and GRU's loops are one op
each, ``ops.lstm_scan`` and ``ops.gru_scan``, whose backward recurrences are one op too).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from dualflow import ops
from dualflow._config import config
from dualflow.errors import ShapeError
from dualflow.nn import init
from dualflow.nn.cells import (
    _ACTIVATIONS,
    GRUCell,
    LSTMCell,
    RNNCell,
    check_dtypes,
    check_features,
    check_nonlinearity,
    check_sizes,
    lstm_step,
    zeros_state,
)
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor

__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNCell", "lstm_step"]

State = tuple[Any, ...]


class _RNNBase(Module):
    """Shared constructor, parameters, input handling and layer loop of RNN, GRU and LSTM."""

    _gates = 1
    _n_states = 1

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, **kw: Any) -> None:
        super().__init__()
        name = type(self).__name__
        check_sizes(name, input_size=input_size, hidden_size=hidden_size, num_layers=num_layers)
        dropout = kw["dropout"]
        if isinstance(dropout, bool) or not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{name}: dropout should be a number in range [0, 1], got {dropout}")
        if dropout > 0 and num_layers == 1:  # PyTorch warns too
            warnings.warn(
                f"{name}: dropout={dropout} only applies between layers, and num_layers=1",
                stacklevel=3,
            )
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers = int(num_layers)
        self.bias, self.batch_first = bool(kw["bias"]), bool(kw["batch_first"])
        self.dropout, self.bidirectional = float(dropout), bool(kw["bidirectional"])
        self.num_directions = 2 if self.bidirectional else 1
        self._make_parameters(kw["dtype"], kw["device"])
        self.reset_parameters()

    def _make_parameters(self, dtype: Any, device: Any) -> None:
        rows = self._gates * self.hidden_size
        for layer in range(self.num_layers):
            width = self.input_size if layer == 0 else self.hidden_size * self.num_directions
            for suffix in ("", "_reverse")[: self.num_directions]:
                shapes = {"weight_ih": (rows, width), "weight_hh": (rows, self.hidden_size)}
                if self.bias:
                    shapes.update(bias_ih=(rows,), bias_hh=(rows,))
                for name, shape in shapes.items():
                    param = init.empty_parameter(shape, dtype, device)
                    setattr(self, f"{name}_l{layer}{suffix}", param)

    def reset_parameters(self) -> None:
        """Every parameter ~ U(±1/√hidden_size)."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _weights(self, layer: int, direction: int) -> tuple[Any, Any, Any, Any]:
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        return tuple(getattr(self, name + suffix, None) for name in names)  # type: ignore[return-value]

    def _step(self, xw_t: Any, state: State, w_hh_t: Any, b_hh: Any) -> State:
        raise NotImplementedError

    def _input_projection(self, x: Any, w_ih: Any, b_ih: Any, b_hh: Any) -> Any:
        xw = ops.matmul(x, ops.transpose(w_ih))  # every step's input projection in one GEMM
        return xw if b_ih is None else xw + (b_ih + b_hh)

    def _run_direction(self, x: Any, state: State, weights: tuple, reverse: bool) -> tuple:
        w_ih, w_hh, b_ih, b_hh = weights
        xw = self._input_projection(x, w_ih, b_ih, b_hh)
        w_hh_t = ops.transpose(w_hh)
        steps = range(x.shape[0])
        outs: list[Any] = [None] * len(steps)
        for t in reversed(steps) if reverse else steps:
            state = self._step(xw[t], state, w_hh_t, b_hh)
            outs[t] = state[0]
        return ops.stack(outs, 0), state

    def _initial_states(self, x: Any, hx: Any, batched: bool) -> list[State]:
        n_states, n = self.num_layers * self.num_directions, x.shape[1]
        if hx is None:
            zeros = zeros_state(x, (n, self.hidden_size))
            return [(zeros,) * self._n_states] * n_states
        given = list(hx) if self._n_states > 1 else [hx]
        if not batched:
            given = [ops.expand_dims(s, 1) for s in given]
        expected = (n_states, n, self.hidden_size)
        for name, s in zip(("h_0", "c_0"), given):
            if tuple(s.shape) != expected:
                raise ShapeError(
                    f"{type(self).__name__}: expected {name} of shape {expected}, got "
                    f"{tuple(s.shape)}"
                )
        return [tuple(s[k] for s in given) for k in range(n_states)]

    def _run_layers(self, x: Any, states: list[State]) -> tuple[Any, list[list]]:
        finals: list[list] = [[] for _ in range(self._n_states)]
        for layer in range(self.num_layers):
            outs = []
            for d in range(self.num_directions):
                state = states[layer * self.num_directions + d]
                out, state = self._run_direction(x, state, self._weights(layer, d), d == 1)
                outs.append(out)
                for k, s in enumerate(state):
                    finals[k].append(s)
            x = outs[0] if len(outs) == 1 else ops.concat(outs, axis=2)
            if self.dropout and layer < self.num_layers - 1:
                x = ops.dropout(x, self.dropout, train=self.training and config.train)
        return x, finals

    def flatten_parameters(self) -> None:
        """PyTorch's call that packs the weights into one cuDNN buffer: nothing to do here, every
        parameter is its own array (ported code calls it after loading a model)."""

    def forward(self, x: Any, hx: Any = None) -> tuple[Tensor, Any]:
        """Run the sequence ``x`` from ``hx`` (zeros when None); returns ``(output, h_n)``."""
        check_features(type(self).__name__, x, self.input_size, (2, 3))
        check_dtypes(type(self).__name__, x, hx, self.weight_ih_l0, "weight_ih_l0", ("h_0", "c_0"))
        batched = len(x.shape) == 3
        if not batched:
            x = ops.expand_dims(x, 1)
        elif self.batch_first:
            x = ops.transpose(x, (1, 0, 2))
        x, finals = self._run_layers(x, self._initial_states(x, hx, batched))
        stacked = [ops.stack(f, 0) for f in finals]
        if not batched:
            x, stacked = ops.squeeze(x, 1), [ops.squeeze(s, 1) for s in stacked]
        elif self.batch_first:
            x = ops.transpose(x, (1, 0, 2))
        return x, (tuple(stacked) if self._n_states > 1 else stacked[0])

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        for key, default in (("bias", True), ("batch_first", False), ("dropout", 0)):
            if getattr(self, key) != default:
                s += f", {key}={getattr(self, key)}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    """Multi-layer Elman RNN: ``output, h_n = rnn(x, h_0)``; act is tanh or relu.

    x is (L, N, input_size) (``batch_first``: (N, L, input_size)) or unbatched (L, input_size);
    output is (L, N, D*H) and h_n is (num_layers*D, N, H) with D = 2 if bidirectional.
    ``dropout`` applies to the outputs of every layer but the last, in training.

    Example:
        >>> import numpy as np
        >>> rnn = RNN(3, 4, 2, nonlinearity="relu")
        >>> out, h = rnn(np.zeros((5, 2, 3), np.float32))
        >>> rnn, out.shape, h.shape
        (RNN(3, 4, num_layers=2, nonlinearity=relu), (5, 2, 4), (2, 2, 4))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        check_nonlinearity("RNN", nonlinearity)
        super().__init__(
            input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
            dropout=dropout, bidirectional=bidirectional, device=device, dtype=dtype,
        )  # fmt: skip
        self.nonlinearity = nonlinearity

    def _step(self, xw_t: Any, state: State, w_hh_t: Any, b_hh: Any) -> State:
        return (_ACTIVATIONS[self.nonlinearity](xw_t + ops.matmul(state[0], w_hh_t)),)


class GRU(_RNNBase):
    """Multi-layer gated recurrent unit: ``output, h_n = gru(x, h_0)`` (shapes as ``RNN``).

    Example:
        >>> import numpy as np
        >>> gru = GRU(3, 4, batch_first=True, bidirectional=True)
        >>> out, h = gru(np.zeros((2, 5, 3), np.float32))
        >>> gru, out.shape, h.shape
        (GRU(3, 4, batch_first=True, bidirectional=True), (2, 5, 8), (2, 2, 4))
    """

    _gates = 3

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
            dropout=dropout, bidirectional=bidirectional, device=device, dtype=dtype,
        )  # fmt: skip

    def _input_projection(self, x: Any, w_ih: Any, b_ih: Any, b_hh: Any) -> Any:
        xw = ops.matmul(x, ops.transpose(w_ih))  # b_hh stays inside r * (W_hn h + b_hn)
        return xw if b_ih is None else xw + b_ih

    def _run_direction(self, x: Any, state: State, weights: tuple, reverse: bool) -> tuple:
        # the whole recurrence as one op (ops.gru_scan), as LSTM's; no bias: b_hh of zeros
        w_ih, w_hh, b_ih, b_hh = weights
        xw = self._input_projection(x, w_ih, b_ih, b_hh)
        if reverse:
            xw = ops.flip(xw, 0)
        if b_hh is None:
            b_hh = zeros_state(w_hh, (w_hh.shape[0],))
        hs, _, _ = ops.gru_scan(xw, state[0], w_hh, b_hh)
        return (ops.flip(hs, 0) if reverse else hs), (hs[-1],)


class LSTM(_RNNBase):
    """Multi-layer LSTM over a sequence: ``output, (h_n, c_n) = lstm(x, (h_0, c_0))``.

    Shapes as ``RNN``; c_n is shaped as h_n. Gates are ordered i, f, g, o along the 4H axis.

    Example:
        >>> import numpy as np
        >>> lstm = LSTM(3, 4, num_layers=2)
        >>> out, (h, c) = lstm(np.zeros((5, 2, 3), np.float32))
        >>> lstm, out.shape, h.shape, c.shape
        (LSTM(3, 4, num_layers=2), (5, 2, 4), (2, 2, 4), (2, 2, 4))
    """

    _gates = 4
    _n_states = 2

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
        if proj_size:
            raise NotImplementedError("LSTM: proj_size is not supported")
        super().__init__(
            input_size, hidden_size, num_layers, bias=bias, batch_first=batch_first,
            dropout=dropout, bidirectional=bidirectional, device=device, dtype=dtype,
        )  # fmt: skip

    def _step(self, xw_t: Any, state: State, w_hh_t: Any, b_hh: Any) -> State:
        h, c = state
        return lstm_step(xw_t + ops.matmul(h, w_hh_t), c)

    def _run_direction(self, x: Any, state: State, weights: tuple, reverse: bool) -> tuple:
        # the whole recurrence as one op (ops.lstm_scan): a per-step loop of ops costs ~3x
        w_ih, w_hh, b_ih, b_hh = weights
        xw = self._input_projection(x, w_ih, b_ih, b_hh)
        if reverse:
            xw = ops.flip(xw, 0)
        hs, cs, _ = ops.lstm_scan(xw, state[0], state[1], w_hh)
        final = (hs[-1], cs[-1])
        return (ops.flip(hs, 0) if reverse else hs), final

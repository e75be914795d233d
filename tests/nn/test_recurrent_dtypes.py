"""RNN/GRU/LSTM and their cells refuse an input or hidden state of another float dtype than
their weights (PyTorch raises; the GEMMs would silently upcast), naming the layer, both dtypes
and the user's line; ``flatten_parameters()`` is PyTorch's no-op-here call."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.errors import DTypeError

LAYERS = [nn.RNN, nn.GRU, nn.LSTM]
CELLS = [nn.RNNCell, nn.GRUCell, nn.LSTMCell]


@pytest.mark.parametrize("layer_type", LAYERS)
def test_float64_input_to_a_float32_layer_raises_at_the_users_line(layer_type) -> None:
    layer = layer_type(3, 4, num_layers=2)
    before = {k: v.numpy().copy() for k, v in layer.state_dict().items()}
    here = inspect.currentframe().f_lineno
    with pytest.raises(DTypeError) as info:
        layer(dualflow.randn(5, 2, 3, dtype=dualflow.float64))  # the user's line: here + 2
    message = str(info.value)
    where = f"{__file__}:{here + 2}"
    name = layer_type.__name__
    assert message.startswith(f"{name}: input is float64 but weight_ih_l0 is float32")
    assert where in message
    assert all(np.array_equal(v.numpy(), before[k]) for k, v in layer.state_dict().items())


@pytest.mark.parametrize("layer_type", LAYERS)
def test_a_hidden_state_of_another_dtype_raises(layer_type) -> None:
    layer = layer_type(3, 4)
    h = dualflow.zeros(1, 2, 4, dtype=dualflow.float64)
    hx = (h, dualflow.zeros(1, 2, 4)) if layer_type is nn.LSTM else h
    with pytest.raises(DTypeError, match=f"{layer_type.__name__}: h_0 is float64 but weight_ih_l0"):
        layer(dualflow.randn(5, 2, 3), hx)


def test_lstm_cell_state_of_another_dtype_raises() -> None:
    layer = nn.LSTM(3, 4)
    hx = (dualflow.zeros(1, 2, 4), dualflow.zeros(1, 2, 4, dtype=dualflow.float64))
    with pytest.raises(DTypeError, match="LSTM: c_0 is float64 but weight_ih_l0 is float32"):
        layer(dualflow.randn(5, 2, 3), hx)


@pytest.mark.parametrize("cell_type", CELLS)
def test_cells_refuse_another_float_dtype(cell_type) -> None:
    cell = cell_type(3, 4)
    name = cell_type.__name__
    with pytest.raises(DTypeError, match=f"{name}: input is float64 but weight_ih is float32"):
        cell(dualflow.randn(2, 3, dtype=dualflow.float64))
    h = dualflow.zeros(2, 4, dtype=dualflow.float64)
    hx = (h, dualflow.zeros(2, 4)) if cell_type is nn.LSTMCell else h
    with pytest.raises(DTypeError, match=f"{name}: hx is float64 but weight_ih is float32"):
        cell(dualflow.randn(2, 3), hx)


@pytest.mark.parametrize("layer_type", LAYERS + CELLS)
def test_a_float64_layer_takes_float64_and_integer_inputs_stay_refused_by_shape(layer_type) -> None:
    layer = layer_type(3, 4).double()
    shape = (2, 3) if layer_type in CELLS else (5, 2, 3)
    out = layer(dualflow.randn(*shape, dtype=dualflow.float64))
    first = out[0] if isinstance(out, tuple) else out
    assert first.dtype == np.float64


def test_flatten_parameters_changes_nothing() -> None:
    lstm = nn.LSTM(3, 4)
    before = {k: v.numpy().copy() for k, v in lstm.state_dict().items()}
    assert lstm.flatten_parameters() is None
    assert all(np.array_equal(v.numpy(), before[k]) for k, v in lstm.state_dict().items())


def test_the_check_holds_in_a_compiled_function_too() -> None:
    lstm = nn.LSTM(3, 4)
    step = dualflow.compile(lambda x: lstm(x)[0].sum())
    assert step(dualflow.randn(5, 2, 3)).dtype == np.float32
    with pytest.raises(DTypeError, match="LSTM: input is float64 but weight_ih_l0 is float32"):
        step(dualflow.randn(5, 2, 3, dtype=dualflow.float64))

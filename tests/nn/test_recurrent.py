"""LSTM and LSTMCell: PyTorch's names and layout, a numpy reference, gradchecks to 2nd order."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.errors import ShapeError
from dualflow.gradcheck import check_backward, check_double_backward
from tests.nn.functional import as_function


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def cell_ref(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """PyTorch's equations, gate order i, f, g, o."""
    gates = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
    i, f, g, o = np.split(gates, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def lstm_ref(lstm: nn.LSTM, x: np.ndarray, hx=None):
    """A straightforward (T, N, in) LSTM over the module's parameters, in float64."""
    p = {k: v.numpy().astype(np.float64) for k, v in lstm.state_dict().items()}
    n_dir, hidden = lstm.num_directions, lstm.hidden_size
    zeros = np.zeros((lstm.num_layers * n_dir, x.shape[1], hidden))
    h0, c0 = hx if hx is not None else (zeros, zeros)
    layer_in, hs, cs = x, [], []
    for layer in range(lstm.num_layers):
        outs = []
        for d in range(n_dir):
            s = f"_l{layer}" + ("_reverse" if d else "")
            weights = [p.get(n + s, 0.0) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            h, c = h0[layer * n_dir + d], c0[layer * n_dir + d]
            out = np.zeros((x.shape[0], x.shape[1], hidden))
            for t in range(x.shape[0])[::-1] if d else range(x.shape[0]):
                h, c = cell_ref(layer_in[t], h, c, *weights)
                out[t] = h
            outs.append(out)
            hs.append(h)
            cs.append(c)
        layer_in = np.concatenate(outs, axis=2)
    return layer_in, np.stack(hs), np.stack(cs)


def test_lstm_parameter_names_and_shapes_match_pytorch() -> None:
    lstm = nn.LSTM(3, 5, num_layers=2)
    shapes = {k: v.shape for k, v in lstm.state_dict().items()}
    assert list(shapes) == [
        "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
        "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1",
    ]  # fmt: skip
    assert shapes["weight_ih_l0"] == (20, 3) and shapes["weight_hh_l0"] == (20, 5)
    assert shapes["weight_ih_l1"] == (20, 5) and shapes["bias_hh_l1"] == (20,)
    bi = nn.LSTM(3, 4, num_layers=2, bias=False, bidirectional=True)
    assert list(bi.state_dict()) == [
        "weight_ih_l0", "weight_hh_l0", "weight_ih_l0_reverse", "weight_hh_l0_reverse",
        "weight_ih_l1", "weight_hh_l1", "weight_ih_l1_reverse", "weight_hh_l1_reverse",
    ]  # fmt: skip
    assert bi.weight_ih_l1.shape == (16, 8)  # the next layer reads both directions


def test_lstm_default_init_is_uniform_in_inverse_sqrt_hidden() -> None:
    lstm = nn.LSTM(30, 64, num_layers=2)
    bound = 1 / math.sqrt(64)
    values = np.concatenate([p.numpy().ravel() for p in lstm.params()])
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.99 * bound
    assert values.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    cell = nn.LSTMCell(5, 16)
    assert max(np.abs(p.numpy()).max() for p in cell.params()) <= 0.25


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"num_layers": 2}, {"num_layers": 2, "bidirectional": True}, {"bias": False}],
)
def test_lstm_forward_matches_the_numpy_equations(kwargs: dict) -> None:
    lstm = nn.LSTM(3, 4, dtype="float64", **kwargs)
    x = np.random.default_rng(0).standard_normal((5, 2, 3))
    out, (h, c) = lstm(x)
    ref_out, ref_h, ref_c = lstm_ref(lstm, x)
    d = lstm.num_directions
    assert out.shape == (5, 2, 4 * d) and h.shape == c.shape == (lstm.num_layers * d, 2, 4)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c.numpy(), ref_c, rtol=1e-10, atol=1e-12)


def test_lstm_initial_state_batch_first_and_unbatched() -> None:
    lstm = nn.LSTM(3, 2, num_layers=2, batch_first=True, dtype="float64")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6, 3))  # (N, L, in)
    h0, c0 = rng.standard_normal((2, 4, 2)), rng.standard_normal((2, 4, 2))
    out, (h, c) = lstm(x, (h0, c0))
    ref_out, ref_h, ref_c = lstm_ref(lstm, x.transpose(1, 0, 2), (h0, c0))
    assert out.shape == (4, 6, 2)
    np.testing.assert_allclose(out.numpy(), ref_out.transpose(1, 0, 2), rtol=1e-10)
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-10)
    np.testing.assert_allclose(c.numpy(), ref_c, rtol=1e-10)
    # unbatched (L, in) input with (layers, H) state; batch_first does not apply to it
    out1, (h1, c1) = lstm(x[0], (h0[:, 0], c0[:, 0]))
    assert out1.shape == (6, 2) and h1.shape == c1.shape == (2, 2)
    np.testing.assert_allclose(out1.numpy(), out.numpy()[0], rtol=1e-10)
    with pytest.raises(ShapeError, match="h_0"):
        lstm(x, (h0[:1], c0))
    with pytest.raises(ShapeError, match="input_size=3"):
        lstm(rng.standard_normal((4, 6, 5)))


def test_lstm_dropout_only_between_layers_and_only_in_training() -> None:
    dualflow.random.seed(0)
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=1.0)
    x = np.random.default_rng(2).standard_normal((3, 2, 3)).astype(np.float32)
    ref_out, _, _ = lstm_ref(lstm, x)
    np.testing.assert_allclose(lstm.eval()(x)[0].numpy(), ref_out, rtol=1e-5, atol=1e-6)
    # dropout=1 zeroes layer 0's output, so layer 1 alone runs on zeros
    out = lstm.train()(x)[0].numpy()
    assert not np.allclose(out, ref_out, atol=1e-3)
    second = nn.LSTM(4, 4)
    second.load_state_dict({k.replace("_l1", "_l0"): v for k, v in lstm.state_dict().items()
                            if k.endswith("_l1")})  # fmt: skip
    expected = lstm_ref(second, np.zeros((3, 2, 4)))[0]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert repr(lstm) == "LSTM(3, 4, num_layers=2, dropout=1.0)"


def test_lstm_backward_reaches_every_parameter() -> None:
    lstm = nn.LSTM(3, 2, num_layers=2, bidirectional=True)
    out, (h, c) = lstm(np.ones((3, 2, 3), np.float32))
    (out.sum() + h.sum() + c.sum()).backward()
    for name, p in lstm.named_params():
        assert p.grad is not None and p.grad.shape == p.shape, name
        assert np.abs(p.grad.numpy()).sum() > 0, name


LSTM_NAMES = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
              "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"]  # fmt: skip


def _lstm_gradcheck_inputs(lstm: nn.LSTM) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 3))  # seq 3, batch 2, input 3
    h0, c0 = rng.standard_normal((2, 2, 2)) * 0.5, rng.standard_normal((2, 2, 2)) * 0.5
    return [x, h0, c0] + [lstm.state_dict()[n].numpy() for n in LSTM_NAMES]


def test_lstm_gradcheck_wrt_input_state_and_all_parameters() -> None:
    lstm = nn.LSTM(3, 2, num_layers=2, dtype="float64")

    def f(x, h0, c0, *params):
        out, (h, c) = as_function(lstm, LSTM_NAMES, n_args=2)(x, (h0, c0), *params)
        return out, h, c

    check_backward(f, _lstm_gradcheck_inputs(lstm))


def test_lstm_double_backward_wrt_input_state_and_all_parameters() -> None:
    lstm = nn.LSTM(3, 2, num_layers=2, dtype="float64")

    def f(x, h0, c0, *params):
        out, (h, c) = as_function(lstm, LSTM_NAMES, n_args=2)(x, (h0, c0), *params)
        return out, h, c

    check_double_backward(f, _lstm_gradcheck_inputs(lstm))


def test_lstm_cell_names_forward_and_gradcheck() -> None:
    cell = nn.LSTMCell(3, 2, dtype="float64")
    names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    assert {k: v.shape for k, v in cell.state_dict().items()} == dict(
        zip(names, [(8, 3), (8, 2), (8,), (8,)])
    )
    rng = np.random.default_rng(4)
    x, h, c = rng.standard_normal((4, 3)), rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    h1, c1 = cell(x, (h, c))
    ref_h, ref_c = cell_ref(x, h, c, *(cell.state_dict()[n].numpy() for n in names))
    np.testing.assert_allclose(h1.numpy(), ref_h, rtol=1e-10)
    np.testing.assert_allclose(c1.numpy(), ref_c, rtol=1e-10)
    h0, _ = cell(x)
    np.testing.assert_allclose(h0.numpy(), cell_ref(x, 0 * h, 0 * c, *(
        cell.state_dict()[n].numpy() for n in names))[0], rtol=1e-10)  # fmt: skip
    hu, cu = cell(x[0], (h[0], c[0]))
    assert hu.shape == cu.shape == (2,)
    np.testing.assert_allclose(hu.numpy(), ref_h[0], rtol=1e-10)

    def f(x, h, c, *params):
        return as_function(cell, names, n_args=2)(x, (h, c), *params)

    inputs = [x[:2], h[:2], c[:2]] + [cell.state_dict()[n].numpy() for n in names]
    check_backward(f, inputs)
    check_double_backward(f, inputs)
    assert repr(nn.LSTMCell(3, 2, bias=False)) == "LSTMCell(3, 2, bias=False)"


def test_lstm_argument_checks() -> None:
    with pytest.raises(NotImplementedError):
        nn.LSTM(3, 2, proj_size=1)
    with pytest.raises(ValueError):
        nn.LSTM(3, 2, dropout=2.0)
    with pytest.raises(ValueError):
        nn.LSTM(3, 0)

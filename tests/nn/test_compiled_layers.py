"""Every layer added for PyTorch parity trains the same under ``@dualflow.compile`` as eagerly
(losses, parameters and buffers after a few SGD steps), and runs as a compiled plan."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn
from tests.nn.compiled import assert_compiled_equals_eager

RNG = np.random.default_rng(0)


def x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


PADDING = np.array([[False, False, False, True], [False, False, False, False]])
CAUSAL = nn.Transformer.generate_square_subsequent_mask(4)


class Wrapped(nn.Module):
    """A module around a callable (so masks can be bound), registering the inner module."""

    def __init__(self, inner: nn.Module, call) -> None:
        super().__init__()
        self.inner, self.call = inner, call

    def forward(self, *xs):
        return self.call(self.inner, *xs)


def mha_with_masks() -> nn.Module:
    inner = nn.MultiheadAttention(8, 2, batch_first=True, add_bias_kv=True)
    return Wrapped(inner, lambda m, q: m(q, q, q, key_padding_mask=PADDING, attn_mask=CAUSAL))


def encoder_causal() -> nn.Module:
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True, norm_first=True)
    inner = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))
    return Wrapped(
        inner, lambda m, s: m(s, mask=CAUSAL, src_key_padding_mask=PADDING, is_causal=True)
    )


CASES = {
    "rnn": (lambda: nn.RNN(3, 4, 2, nonlinearity="relu", bidirectional=True), [x(5, 2, 3)]),
    "gru": (lambda: nn.GRU(3, 4, 2, batch_first=True, dropout=0.2), [x(2, 5, 3)]),
    "lstm": (lambda: nn.LSTM(3, 4, bidirectional=True), [x(5, 2, 3)]),
    "rnn_cell": (lambda: nn.RNNCell(3, 4), [x(2, 3), x(2, 4)]),
    "gru_cell": (lambda: nn.GRUCell(3, 4), [x(2, 3)]),
    "conv1d": (
        lambda: nn.Sequential(
            nn.Conv1d(2, 4, 3, padding="same", padding_mode="circular"),
            nn.MaxPool1d(2),
            nn.AvgPool1d(2, 1, 1),
            nn.AdaptiveAvgPool1d(3),
        ),
        [x(2, 2, 9)],
    ),
    "conv_transpose1d": (lambda: nn.ConvTranspose1d(2, 3, 3, stride=2), [x(2, 2, 5)]),
    "norms": (
        lambda: nn.Sequential(
            nn.GroupNorm(2, 4), nn.InstanceNorm2d(4, affine=True, track_running_stats=True)
        ),
        [x(2, 4, 3, 3)],
    ),
    "dropout2d": (lambda: nn.Sequential(nn.Conv2d(2, 4, 1), nn.Dropout2d(0.5)), [x(3, 2, 4, 4)]),
    "upsample": (
        lambda: nn.Sequential(
            nn.Conv2d(2, 8, 1),
            nn.Upsample(scale_factor=1.5, mode="bilinear"),
            nn.PixelShuffle(2),
            nn.Upsample(size=(5, 4)),
            nn.Unflatten(1, (1, 2)),
            nn.Flatten(1, 2),
        ),
        [x(1, 2, 3, 3)],
    ),
    "mha": (mha_with_masks, [x(2, 4, 8)]),
    "encoder": (encoder_causal, [x(2, 4, 8)]),
    "transformer": (lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0), [x(5, 2, 8), x(3, 2, 8)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_compiled_equals_eager(name: str) -> None:
    build, inputs = CASES[name]
    fn = assert_compiled_equals_eager(build, inputs)
    assert fn.stats().traces <= 2  # the optimizer's first step makes one trace single-use


def test_module_write_inside_compiled_still_fails_closed() -> None:
    model = nn.GRU(2, 2)

    @dualflow.compile(fallback="error")
    def f(x):
        model.hidden_size = 3
        return model(x)[0]

    with pytest.raises(dualflow.errors.TracingError, match="hidden_size"):
        f(x(3, 1, 2))
    assert model.hidden_size == 2

"""The nn compatibility table: one case per layer configuration, shared by the reference script
(``make_nn_references.py``, run with torch) and ``test_nn_compat.py`` (run without torch).

``build(nn)`` constructs the module from either namespace (``torch.nn`` or ``dualflow.nn``) with
the same call; ``inputs(rng)`` gives the forward's positional and keyword numpy arguments (float
positional arguments are differentiated).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Case:
    """One layer configuration: how to build it, its inputs, and the mode it runs in."""

    id: str
    build: Callable[[Any], Any]
    inputs: Callable[[np.random.Generator], tuple[list, dict]]
    train: bool = True
    tol: tuple[float, float] = (1e-9, 1e-12)  # (rtol, atol) of float64 values and gradients
    hooks: Callable[[Any], None] | None = field(default=None)


def randn(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.standard_normal(shape)


def positional(*makers: Callable) -> Callable[[np.random.Generator], tuple[list, dict]]:
    return lambda rng: ([m(rng) for m in makers], {})


def causal(n: int) -> np.ndarray:
    return np.triu(np.full((n, n), -np.inf), k=1)


def _mha_masks(rng: np.random.Generator) -> tuple[list, dict]:
    x = rng.standard_normal((2, 4, 8))
    padding = np.array([[False, False, False, True], [False, False, True, True]])
    mask = rng.standard_normal((4, 4))
    return [x, x, x], {"key_padding_mask": padding, "attn_mask": mask}


def _mha_cross(rng: np.random.Generator) -> tuple[list, dict]:
    q, k, v = (
        rng.standard_normal((4, 2, 8)),
        rng.standard_normal((5, 2, 6)),
        rng.standard_normal((5, 2, 3)),
    )
    bool_mask = rng.random((2 * 2, 4, 5)) < 0.3
    bool_mask[:, :, 0] = False  # every query keeps one key
    return [q, k, v], {"attn_mask": bool_mask, "average_attn_weights": False}


def _mha_bias_kv(rng: np.random.Generator) -> tuple[list, dict]:
    q, kv = rng.standard_normal((3, 2, 8)), rng.standard_normal((5, 2, 8))
    return [q, kv, kv], {"key_padding_mask": np.array([[0, 0, 0, 0, -1.0], [0, -2.0, 0, 0, 0]])}


def _encoder_inputs(rng: np.random.Generator) -> tuple[list, dict]:
    padding = np.array([[False] * 5, [False, False, False, False, True]])
    return [rng.standard_normal((2, 5, 8))], {
        "src_mask": causal(5),
        "src_key_padding_mask": padding,
    }


def _stack_inputs(rng: np.random.Generator) -> tuple[list, dict]:
    return [rng.standard_normal((5, 2, 8))], {"mask": causal(5), "is_causal": True}


def _transformer_inputs(rng: np.random.Generator) -> tuple[list, dict]:
    src, tgt = rng.standard_normal((6, 2, 8)), rng.standard_normal((4, 2, 8))
    return [src, tgt], {"tgt_mask": causal(4), "tgt_is_causal": True}


def _rnn_with_state(layers: int, directions: int, n: int = 3, h: int = 4, length: int = 5):
    def make(rng: np.random.Generator) -> tuple[list, dict]:
        return [
            rng.standard_normal((length, n, 3)),
            rng.standard_normal((layers * directions, n, h)),
        ], {}

    return make


def _lstm_with_state(rng: np.random.Generator) -> tuple[list, dict]:
    x = rng.standard_normal((3, 5, 3))  # batch_first
    return [x, (rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4)))], {}


def _scale_output(module: Any) -> None:
    module.register_forward_hook(lambda m, args, out: out * 2.0)
    module.register_forward_pre_hook(lambda m, args: (args[0] + 1.0,))


def _scale_grad_input(module: Any) -> None:
    module[1].register_full_backward_hook(lambda m, gin, gout: (gin[0] * 0.5,))
    module[0].register_full_backward_pre_hook(lambda m, gout: (gout[0] * 3.0,))


CASES = [
    Case("rnn_tanh_2layers", lambda nn: nn.RNN(3, 4, 2), positional(randn(5, 2, 3))),
    Case(
        "rnn_relu_bidir_batch_first",
        lambda nn: nn.RNN(3, 4, nonlinearity="relu", batch_first=True, bidirectional=True),
        positional(randn(2, 5, 3)),
    ),
    Case("rnn_with_h0", lambda nn: nn.RNN(3, 4, 2, bidirectional=True), _rnn_with_state(2, 2)),
    Case("rnn_unbatched", lambda nn: nn.RNN(3, 4, bias=False), positional(randn(6, 3))),
    Case(
        "gru_2layers_bidir",
        lambda nn: nn.GRU(3, 4, 2, bidirectional=True),
        positional(randn(5, 2, 3)),
    ),
    Case("gru_with_h0", lambda nn: nn.GRU(3, 4, 1), _rnn_with_state(1, 1)),
    Case(
        "gru_batch_first_no_bias",
        lambda nn: nn.GRU(3, 4, batch_first=True, bias=False),
        positional(randn(2, 5, 3)),
    ),
    Case("lstm_with_state", lambda nn: nn.LSTM(3, 4, 2, batch_first=True), _lstm_with_state),
    Case("rnn_cell_tanh", lambda nn: nn.RNNCell(3, 4), positional(randn(2, 3), randn(2, 4))),
    Case(
        "rnn_cell_relu", lambda nn: nn.RNNCell(3, 4, nonlinearity="relu"), positional(randn(2, 3))
    ),
    Case("gru_cell", lambda nn: nn.GRUCell(3, 4), positional(randn(2, 3), randn(2, 4))),
    Case("gru_cell_unbatched", lambda nn: nn.GRUCell(3, 4, bias=False), positional(randn(3))),
    Case(
        "lstm_cell",
        lambda nn: nn.LSTMCell(3, 4),
        lambda rng: (
            [
                rng.standard_normal((2, 3)),
                (rng.standard_normal((2, 4)), rng.standard_normal((2, 4))),
            ],
            {},
        ),
    ),
    Case(
        "conv1d_strided_groups",
        lambda nn: nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2),
        positional(randn(2, 4, 9)),
    ),
    Case(
        "conv1d_same_dilated",
        lambda nn: nn.Conv1d(3, 5, 4, padding="same", dilation=2),
        positional(randn(2, 3, 10)),
    ),
    Case(
        "conv1d_circular",
        lambda nn: nn.Conv1d(2, 3, 3, padding=2, padding_mode="circular"),
        positional(randn(2, 2, 7)),
    ),
    Case(
        "conv1d_reflect_unbatched",
        lambda nn: nn.Conv1d(2, 3, 3, padding=1, padding_mode="reflect"),
        positional(randn(2, 7)),
    ),
    Case(
        "conv_transpose1d",
        lambda nn: nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1, output_padding=1),
        positional(randn(2, 4, 5)),
    ),
    Case(
        "conv2d_circular",
        lambda nn: nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="circular"),
        positional(randn(1, 2, 5, 6)),
    ),
    Case("max_pool1d", lambda nn: nn.MaxPool1d(3, 2, 1), positional(randn(2, 3, 8))),
    Case("avg_pool1d", lambda nn: nn.AvgPool1d(2, 1, 1), positional(randn(2, 3, 7))),
    Case("adaptive_avg_pool1d", lambda nn: nn.AdaptiveAvgPool1d(3), positional(randn(2, 3, 7))),
    Case(
        "adaptive_avg_pool2d_uneven",
        lambda nn: nn.AdaptiveAvgPool2d((3, 4)),
        positional(randn(2, 3, 5, 7)),
    ),
    Case(
        "dropout2d_eval", lambda nn: nn.Dropout2d(0.5), positional(randn(2, 3, 4, 4)), train=False
    ),
    Case("unflatten", lambda nn: nn.Unflatten(1, (2, 3)), positional(randn(4, 6, 2))),
    Case("group_norm", lambda nn: nn.GroupNorm(2, 4), positional(randn(3, 4, 5))),
    Case(
        "group_norm_no_affine",
        lambda nn: nn.GroupNorm(3, 6, affine=False),
        positional(randn(2, 6, 2, 3)),
    ),
    Case(
        "instance_norm1d_affine",
        lambda nn: nn.InstanceNorm1d(3, affine=True),
        positional(randn(2, 3, 6)),
    ),
    Case(
        "instance_norm2d_running",
        lambda nn: nn.InstanceNorm2d(3, track_running_stats=True),
        positional(randn(2, 3, 4, 5)),
    ),
    Case(
        "instance_norm2d_running_eval",
        lambda nn: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
        positional(randn(2, 3, 4, 5)),
        train=False,
    ),
    Case(
        "upsample_nearest_scale",
        lambda nn: nn.Upsample(scale_factor=2),
        positional(randn(1, 2, 3, 4)),
    ),
    Case(
        "upsample_nearest_size", lambda nn: nn.Upsample(size=(5, 7)), positional(randn(1, 2, 3, 4))
    ),
    Case(
        "upsample_nearest_exact",
        lambda nn: nn.Upsample(size=(5, 3), mode="nearest-exact"),
        positional(randn(1, 2, 3, 4)),
    ),
    Case(
        "upsample_bilinear",
        lambda nn: nn.Upsample(scale_factor=2, mode="bilinear"),
        positional(randn(1, 2, 3, 4)),
    ),
    Case(
        "upsample_bilinear_fractional",
        lambda nn: nn.Upsample(scale_factor=1.5, mode="bilinear"),
        positional(randn(1, 2, 3, 5)),
    ),
    Case(
        "upsample_bilinear_align",
        lambda nn: nn.Upsample(size=(4, 7), mode="bilinear", align_corners=True),
        positional(randn(1, 2, 3, 4)),
    ),
    Case(
        "upsample_linear",
        lambda nn: nn.Upsample(scale_factor=2.5, mode="linear"),
        positional(randn(2, 3, 4)),
    ),
    Case(
        "upsample_area",
        lambda nn: nn.Upsample(size=(2, 3), mode="area"),
        positional(randn(1, 2, 5, 7)),
    ),
    Case(
        "upsampling_bilinear2d",
        lambda nn: nn.UpsamplingBilinear2d(scale_factor=2),
        positional(randn(1, 2, 3, 3)),
    ),
    Case("pixel_shuffle", lambda nn: nn.PixelShuffle(2), positional(randn(2, 8, 3, 2))),
    Case("pixel_unshuffle", lambda nn: nn.PixelUnshuffle(2), positional(randn(2, 2, 4, 6))),
    Case(
        "mha_self",
        lambda nn: nn.MultiheadAttention(8, 2),
        lambda rng: ([x := rng.standard_normal((4, 2, 8)), x, x], {}),
    ),
    Case(
        "mha_masks_batch_first",
        lambda nn: nn.MultiheadAttention(8, 2, batch_first=True),
        _mha_masks,
    ),
    Case(
        "mha_kdim_vdim_no_bias",
        lambda nn: nn.MultiheadAttention(8, 2, bias=False, kdim=6, vdim=3),
        _mha_cross,
    ),
    Case(
        "mha_bias_kv_zero_attn",
        lambda nn: nn.MultiheadAttention(8, 4, add_bias_kv=True, add_zero_attn=True),
        _mha_bias_kv,
    ),
    Case(
        "mha_unbatched",
        lambda nn: nn.MultiheadAttention(8, 2),
        lambda rng: (
            [rng.standard_normal((3, 8)), k := rng.standard_normal((4, 8)), k],
            {"need_weights": False},
        ),
    ),
    Case(
        "encoder_layer_post_norm",
        lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
        positional(randn(5, 2, 8)),
    ),
    Case(
        "encoder_layer_pre_norm_gelu",
        lambda nn: nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        ),
        _encoder_inputs,
    ),
    Case(
        "encoder_stack_causal",
        lambda nn: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
            2,
            norm=nn.LayerNorm(8),
            enable_nested_tensor=False,
        ),
        _stack_inputs,
    ),
    Case(
        "decoder_layer",
        lambda nn: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0),
        lambda rng: (
            [rng.standard_normal((4, 2, 8)), rng.standard_normal((6, 2, 8))],
            {"tgt_mask": causal(4)},
        ),
    ),
    Case(
        "transformer", lambda nn: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0), _transformer_inputs
    ),
    Case("hooks_forward", lambda nn: nn.Linear(3, 2), positional(randn(4, 3)), hooks=_scale_output),
    Case(
        "hooks_backward",
        lambda nn: nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)),
        positional(randn(5, 3)),
        hooks=_scale_grad_input,
    ),
]


def tied(nn: Any) -> Any:
    """A model whose decoder weight is its embedding weight (a PyTorch language-model idiom)."""
    model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5, bias=False))
    model[1].weight = model[0].weight
    return model

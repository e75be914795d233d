"""Linear, Conv2d, ConvTranspose2d: names, shapes, numpy references, default init, repr."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.errors import ShapeError


def conv2d_ref(x, w, b=None, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1):
    """Direct convolution: one einsum per kernel tap and group."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    ho = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    y, og = np.zeros((n, o, ho, wo)), o // groups
    for g in range(groups):
        xs, ws = xp[:, g * cg : (g + 1) * cg], w[g * og : (g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dil[0], j * dil[1]
                patch = xs[:, :, r0 : r0 + stride[0] * (ho - 1) + 1 : stride[0],
                           c0 : c0 + stride[1] * (wo - 1) + 1 : stride[1]]  # fmt: skip
                y[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def conv_transpose2d_ref(x, w, b=None, stride=(1, 1), pad=(0, 0), out_pad=(0, 0), groups=1,
                         dil=(1, 1)):  # fmt: skip
    """Scatter every input pixel times the kernel into the output, then crop the padding."""
    n, cin, h, wd = x.shape
    _, og, kh, kw = w.shape
    full = [(s - 1) * st + d * (k - 1) + 1 + op
            for s, st, d, k, op in zip((h, wd), stride, dil, (kh, kw), out_pad)]  # fmt: skip
    y, cg = np.zeros((n, og * groups, *full)), cin // groups
    for g in range(groups):
        xs, ws = x[:, g * cg : (g + 1) * cg], w[g * cg : (g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dil[0], j * dil[1]
                y[:, g * og : (g + 1) * og, r0 : r0 + stride[0] * (h - 1) + 1 : stride[0],
                  c0 : c0 + stride[1] * (wd - 1) + 1 : stride[1]] += np.einsum(
                    "nchw,co->nohw", xs, ws[:, :, i, j])  # fmt: skip
    out = [f - 2 * p for f, p in zip(full, pad)]
    y = y[:, :, pad[0] : pad[0] + out[0], pad[1] : pad[1] + out[1]]
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def keys(module: nn.Module) -> dict[str, tuple[int, ...]]:
    return {k: v.shape for k, v in module.state_dict().items()}


# ----- Linear ---------------------------------------------------------------------------------
def test_linear_names_shapes_and_forward() -> None:
    layer = nn.Linear(3, 2)
    assert keys(layer) == {"weight": (2, 3), "bias": (2,)}
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    y = layer(x)
    assert y.shape == (4, 2) and y.dtype == np.float32
    ref = x @ layer.weight.numpy().T + layer.bias.numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-6, atol=1e-6)
    # leading batch axes are kept
    assert layer(np.zeros((5, 6, 3), np.float32)).shape == (5, 6, 2)


def test_linear_without_bias() -> None:
    layer = nn.Linear(3, 2, bias=False)
    assert list(layer.state_dict()) == ["weight"] and layer.bias is None
    assert repr(layer) == "Linear(in_features=3, out_features=2, bias=False)"
    np.testing.assert_allclose(layer(np.eye(3, dtype=np.float32)).numpy(), layer.weight.numpy().T)


def test_linear_default_init_statistics() -> None:
    layer = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    w, b = layer.weight.numpy(), layer.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert w.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    assert np.abs(b).max() <= bound and b.std() > 0


def test_linear_gradients_reach_the_parameters() -> None:
    layer = nn.Linear(3, 2)
    x = dualflow.tensor(np.ones((4, 3), np.float32))
    layer(x).sum().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), np.full((2, 3), 4.0))
    np.testing.assert_allclose(layer.bias.grad.numpy(), np.full((2,), 4.0))


def test_seed_makes_construction_reproducible() -> None:
    def build() -> nn.Module:
        return nn.Sequential(nn.Linear(4, 5), nn.Conv2d(2, 3, 3), nn.LSTM(3, 2), nn.Embedding(5, 2))

    dualflow.random.seed(11)
    a = {k: v.numpy().copy() for k, v in build().state_dict().items()}
    dualflow.random.seed(11)
    b = {k: v.numpy().copy() for k, v in build().state_dict().items()}
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    dualflow.random.seed(12)
    c = build().state_dict()
    assert not np.array_equal(a["0.weight"], c["0.weight"].numpy())


def test_dtype_argument() -> None:
    layer = nn.Linear(2, 2, dtype="float64")
    assert layer.weight.dtype == np.float64 and layer.bias.dtype == np.float64


# ----- Conv2d -----------------------------------------------------------------------------------
CONV_CASES = [
    {"kernel_size": 3},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 0), "dilation": (2, 1)},
    {"kernel_size": 3, "groups": 2, "padding": 1},
    {"kernel_size": 1, "bias": False},
]


@pytest.mark.parametrize("kwargs", CONV_CASES)
def test_conv2d_matches_the_direct_reference(kwargs: dict) -> None:
    conv = nn.Conv2d(4, 6, dtype="float64", **kwargs)
    kh, kw = conv.kernel_size
    expected = {"weight": (6, 4 // conv.groups, kh, kw)}
    if kwargs.get("bias", True):
        expected["bias"] = (6,)
    assert keys(conv) == expected
    x = np.random.default_rng(1).standard_normal((2, 4, 7, 8))
    b = None if conv.bias is None else conv.bias.numpy()
    ref = conv2d_ref(x, conv.weight.numpy(), b, conv.stride, conv.padding, conv.dilation,
                     conv.groups)  # fmt: skip
    y = conv(x)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("kernel", "dilation"), [(3, 1), (4, 1), ((2, 5), (3, 1))])
def test_conv2d_same_padding_keeps_the_size(kernel, dilation) -> None:
    conv = nn.Conv2d(2, 3, kernel, padding="same", dilation=dilation, dtype="float64")
    x = np.random.default_rng(2).standard_normal((1, 2, 6, 7))
    y = conv(x)
    assert y.shape == (1, 3, 6, 7)
    # PyTorch puts the odd extra padding at the end (bottom/right).
    kh, kw = conv.kernel_size
    th, tw = conv.dilation[0] * (kh - 1), conv.dilation[1] * (kw - 1)
    xp = np.pad(x, ((0, 0), (0, 0), (th // 2, th - th // 2), (tw // 2, tw - tw // 2)))
    ref = conv2d_ref(xp, conv.weight.numpy(), conv.bias.numpy(), dil=conv.dilation)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("mode", "np_mode"), [("reflect", "reflect"), ("replicate", "edge")])
def test_conv2d_padding_modes(mode: str, np_mode: str) -> None:
    conv = nn.Conv2d(2, 2, 3, padding=1, padding_mode=mode, dtype="float64")
    x = np.random.default_rng(3).standard_normal((1, 2, 5, 5))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode=np_mode)
    ref = conv2d_ref(xp, conv.weight.numpy(), conv.bias.numpy())
    np.testing.assert_allclose(conv(x).numpy(), ref, rtol=1e-10, atol=1e-10)
    assert "padding_mode=" + mode in repr(conv)


def test_conv2d_valid_padding_and_argument_checks() -> None:
    assert nn.Conv2d(1, 1, 3, padding="valid")(np.zeros((1, 1, 5, 5), np.float32)).shape == (
        1, 1, 3, 3,
    )  # fmt: skip
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(3, 4, 3, padding_mode="wrap")
    with pytest.raises(ValueError, match="kernel_size must be positive"):
        nn.Conv2d(3, 4, 0)
    with pytest.raises(ShapeError):
        nn.Conv2d(3, 4, 3)(np.zeros((1, 2, 5, 5), np.float32))


def test_conv2d_default_init_uses_fan_in_of_the_weight() -> None:
    conv = nn.Conv2d(32, 64, 3, groups=2)
    bound = 1 / math.sqrt(16 * 9)
    w = conv.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert np.abs(conv.bias.numpy()).max() <= bound


def test_conv_reprs() -> None:
    assert repr(nn.Conv2d(3, 8, 3)) == "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1))"
    assert repr(nn.Conv2d(3, 8, 3, 2, 1, 2, 1, False)) == (
        "Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(2, 2), "
        "bias=False)"
    )
    assert repr(nn.ConvTranspose2d(4, 2, 3, 2, 1, 1, groups=2)) == (
        "ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), "
        "output_padding=(1, 1), groups=2)"
    )


# ----- ConvTranspose2d --------------------------------------------------------------------------
TRANSPOSE_CASES = [
    {"kernel_size": 3},
    {"kernel_size": 2, "stride": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1, "output_padding": 1},
    {"kernel_size": (3, 2), "stride": (2, 1), "dilation": (1, 2), "groups": 2, "bias": False},
]


@pytest.mark.parametrize("kwargs", TRANSPOSE_CASES)
def test_conv_transpose2d_matches_the_scatter_reference(kwargs: dict) -> None:
    conv = nn.ConvTranspose2d(4, 6, dtype="float64", **kwargs)
    expected = {"weight": (4, 6 // conv.groups, *conv.kernel_size)}
    if kwargs.get("bias", True):
        expected["bias"] = (6,)
    assert keys(conv) == expected
    x = np.random.default_rng(4).standard_normal((2, 4, 4, 5))
    b = None if conv.bias is None else conv.bias.numpy()
    ref = conv_transpose2d_ref(x, conv.weight.numpy(), b, conv.stride, conv.padding,
                               conv.output_padding, conv.groups, conv.dilation)  # fmt: skip
    y = conv(x)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-10, atol=1e-10)


def test_conv_transpose2d_inverts_the_conv2d_shape_with_output_size() -> None:
    down = nn.Conv2d(2, 4, 3, stride=2, padding=1)
    up = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1)
    x = np.zeros((1, 2, 8, 8), np.float32)
    h = down(x)
    assert up(h).shape == (1, 2, 7, 7)
    assert up(h, output_size=x.shape).shape == x.shape
    with pytest.raises(ValueError, match="output size"):
        up(h, output_size=(10, 10))


def test_conv_transpose2d_default_init_uses_pytorch_fan_in() -> None:
    # PyTorch computes fan_in from weight dims 1.. = out_channels/groups * kh * kw.
    conv = nn.ConvTranspose2d(8, 50, 2)
    bound = 1 / math.sqrt(50 * 4)
    assert np.abs(conv.weight.numpy()).max() <= bound
    assert np.abs(conv.weight.numpy()).max() > 0.98 * bound

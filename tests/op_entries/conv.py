"""Op-table entries for conv2d, conv_transpose2d and conv2d_grad_weight.

The references loop over output (or input) positions in float64 straight from the definitions,
sharing no code with the im2col implementation. Samples stay small for gradcheck.
"""

from __future__ import annotations

import numpy as np

from dualflow import ops
from tests.opinfo import OpInfo, Sample


def _two(v: int | tuple) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _padded(x: np.ndarray, pad: tuple[int, int]) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))


def _tap(i: int, s: int, d: int, k: int) -> slice:
    """Rows (or cols) that output position ``i`` reads: k taps from i*s, d apart."""
    return slice(i * s, i * s + d * (k - 1) + 1, d)


def conv2d_ref(x, w, b=None, stride=1, pad=0, dilation=1, groups=1):
    (sh, sw), (ph, pw), (dh, dw) = _two(stride), _two(pad), _two(dilation)
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho, wo = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = _padded(x, (ph, pw))
    y = np.zeros((n, o, ho, wo))
    for oc in range(o):
        g = oc // (o // groups)
        for i in range(ho):
            for j in range(wo):
                patch = xp[:, g * cg : (g + 1) * cg, _tap(i, sh, dh, kh), _tap(j, sw, dw, kw)]
                y[:, oc, i, j] = np.sum(patch * w[oc], axis=(1, 2, 3))
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def conv_transpose2d_ref(x, w, b=None, stride=1, pad=0, output_padding=0, groups=1, dilation=1):
    (sh, sw), (ph, pw), (dh, dw) = _two(stride), _two(pad), _two(dilation)
    oph, opw = _two(output_padding)
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    ho = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    wo = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    full = np.zeros((n, cog * groups, ho + 2 * ph, wo + 2 * pw))
    cig = cin // groups
    for ci in range(cin):
        g = ci // cig
        for i in range(h):
            for j in range(wd):
                contribution = x[:, ci, i, j][:, None, None, None] * w[ci][None]
                full[:, g * cog : (g + 1) * cog, _tap(i, sh, dh, kh), _tap(j, sw, dw, kw)] += (
                    contribution
                )
    y = full[:, :, ph : ph + ho, pw : pw + wo]
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def conv2d_grad_weight_ref(x, gy, ksize, stride=1, pad=0, dilation=1, groups=1):
    (kh, kw), (sh, sw), (dh, dw) = _two(ksize), _two(stride), _two(dilation)
    xp = _padded(x, _two(pad))
    c, o = x.shape[1], gy.shape[1]
    cg, og = c // groups, o // groups
    ho, wo = gy.shape[2:]
    gw = np.zeros((o, cg, kh, kw))
    for oc in range(o):
        g = oc // og
        for a in range(kh):
            for b in range(kw):
                rows = slice(a * dh, a * dh + sh * (ho - 1) + 1, sh)
                cols = slice(b * dw, b * dw + sw * (wo - 1) + 1, sw)
                patch = xp[:, g * cg : (g + 1) * cg, rows, cols]  # (N, cg, Ho, Wo)
                gw[oc, :, a, b] = np.einsum("ncij,nij->c", patch, gy[:, oc])
    return gw


def _conv2d_samples(rng: np.random.Generator) -> list[Sample]:
    def s(x, w, bias, name, **kw):
        inputs = (rng.normal(size=x), rng.normal(size=w))
        if bias:
            inputs += (rng.normal(size=(w[0],)),)
        return Sample(inputs, kw, name=name)

    return [
        s((2, 3, 5, 5), (4, 3, 3, 3), True, "plain+bias"),
        s((2, 3, 6, 5), (4, 3, 3, 2), False, "stride2-pad1", stride=2, pad=1),
        s((1, 2, 7, 7), (3, 2, 3, 3), False, "dilation2", dilation=2, pad=(1, 2)),
        s((2, 4, 4, 4), (6, 2, 3, 3), True, "groups2", groups=2, pad=1),
        s((1, 3, 5, 5), (6, 1, 3, 3), False, "depthwise", groups=3, stride=(2, 1), pad=1),
        s((2, 3, 4, 4), (2, 3, 1, 1), False, "1x1"),
    ]


def _conv_transpose2d_samples(rng: np.random.Generator) -> list[Sample]:
    def s(x, w, bias, name, **kw):
        inputs = (rng.normal(size=x), rng.normal(size=w))
        if bias:
            inputs += (rng.normal(size=(w[1] * kw.get("groups", 1),)),)
        return Sample(inputs, kw, name=name)

    return [
        s((2, 4, 3, 3), (4, 3, 3, 3), True, "plain+bias"),
        s((2, 4, 3, 3), (4, 3, 3, 3), False, "stride2-pad1-outpad1", stride=2, pad=1,
          output_padding=1),
        s((1, 4, 3, 4), (4, 2, 2, 3), False, "groups2-dilation2", groups=2, dilation=2),
        s((1, 3, 3, 3), (3, 1, 3, 3), True, "depthwise-stride2", groups=3, stride=2, pad=1),
    ]  # fmt: skip


def _grad_weight_samples(rng: np.random.Generator) -> list[Sample]:
    def s(x, gy, name, **kw):
        return Sample((rng.normal(size=x), rng.normal(size=gy)), kw, name=name)

    return [
        s((2, 3, 5, 5), (2, 4, 3, 3), "plain", ksize=3),
        s((1, 4, 5, 6), (1, 2, 3, 4), "stride2-pad1-groups2", ksize=(3, 2), stride=2, pad=1,
          groups=2),
        s((1, 2, 6, 6), (1, 2, 3, 5), "dilation-depthwise", ksize=2, dilation=(3, 1), groups=2),
    ]  # fmt: skip


ENTRIES = [
    OpInfo(
        "conv2d",
        ops.conv2d,
        conv2d_ref,
        _conv2d_samples,
        f32_tol=(1e-4, 1e-5),
        grad_tol=(1e-5, 1e-5),
    ),
    OpInfo(
        "conv_transpose2d",
        ops.conv_transpose2d,
        conv_transpose2d_ref,
        _conv_transpose2d_samples,
        f32_tol=(1e-4, 1e-5),
        grad_tol=(1e-5, 1e-5),
    ),
    OpInfo(
        "conv2d_grad_weight",
        ops.conv2d_grad_weight,
        conv2d_grad_weight_ref,
        _grad_weight_samples,
        f32_tol=(1e-4, 1e-5),
        grad_tol=(1e-5, 1e-5),
    ),
]

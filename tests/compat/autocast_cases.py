"""The autocast dtype cases: each runs the same expression with torch or dualflow (``T`` the
library, ``F`` its ``nn.functional``) on float32 inputs, or on inputs already in the low type,
inside CPU autocast. ``make_autocast_references.py`` stores PyTorch's output dtypes."""

from __future__ import annotations

import numpy as np


def _labels(T):
    return T.tensor(np.array([0, 1, 2], np.int64))


# name -> (input shapes, f(T, F, *inputs)); matmul/conv (lower), losses/prod (float32), others
CASES = {
    "matmul": ([(3, 4), (4, 5)], lambda T, F, a, b: T.matmul(a, b)),
    "mm": ([(3, 4), (4, 5)], lambda T, F, a, b: T.mm(a, b)),
    "bmm": ([(2, 3, 4), (2, 4, 5)], lambda T, F, a, b: T.bmm(a, b)),
    "linear": ([(3, 4), (5, 4), (5,)], lambda T, F, x, w, b: F.linear(x, w, b)),
    "conv1d": ([(1, 2, 6), (3, 2, 3), (3,)], lambda T, F, x, w, b: F.conv1d(x, w, b)),
    "conv2d": ([(1, 2, 5, 5), (3, 2, 3, 3), (3,)], lambda T, F, x, w, b: F.conv2d(x, w, b)),
    "conv_transpose2d": (
        [(1, 2, 4, 4), (2, 3, 3, 3), (3,)],
        lambda T, F, x, w, b: F.conv_transpose2d(x, w, b),
    ),
    "mse_loss": ([(3, 4), (3, 4)], lambda T, F, a, b: F.mse_loss(a, b)),
    "l1_loss": ([(3, 4), (3, 4)], lambda T, F, a, b: F.l1_loss(a, b)),
    "smooth_l1_loss": ([(3, 4), (3, 4)], lambda T, F, a, b: F.smooth_l1_loss(a, b)),
    "huber_loss": ([(3, 4), (3, 4)], lambda T, F, a, b: F.huber_loss(a, b)),
    "nll_loss": ([(3, 4)], lambda T, F, x: F.nll_loss(x, _labels(T))),
    "cross_entropy": ([(3, 4)], lambda T, F, x: F.cross_entropy(x, _labels(T))),
    "binary_cross_entropy_with_logits": (
        [(3, 4), (3, 4)],
        lambda T, F, a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid()),
    ),
    "kl_div": ([(3, 4), (3, 4)], lambda T, F, a, b: F.kl_div(a, b, reduction="batchmean")),
    "prod": ([(3, 4)], lambda T, F, x: T.prod(x)),
    "softmax": ([(3, 4)], lambda T, F, x: F.softmax(x, -1)),
    "log_softmax": ([(3, 4)], lambda T, F, x: F.log_softmax(x, -1)),
    "sum": ([(3, 4)], lambda T, F, x: T.sum(x)),
    "mean": ([(3, 4)], lambda T, F, x: x.mean()),
    "exp": ([(3, 4)], lambda T, F, x: T.exp(x)),
    "add": ([(3, 4), (3, 4)], lambda T, F, a, b: a + b),
    "relu": ([(3, 4)], lambda T, F, x: F.relu(x)),
    "gelu": ([(3, 4)], lambda T, F, x: F.gelu(x)),
    "layer_norm": ([(3, 4)], lambda T, F, x: F.layer_norm(x, (4,))),
    "group_norm": ([(2, 4, 3)], lambda T, F, x: F.group_norm(x, 2)),
    "cat": ([(3, 4), (3, 4)], lambda T, F, a, b: T.cat([a, b])),
    "max_pool2d": ([(1, 2, 4, 4)], lambda T, F, x: F.max_pool2d(x, 2)),
    # the rest of PyTorch's CPU lists that dualflow has, and matrix products that are on none
    "prelu": ([(2, 3, 4), (3,)], lambda T, F, x, w: F.prelu(x, w)),
    "scaled_dot_product_attention": (
        [(2, 3, 4), (2, 3, 4), (2, 3, 4)],
        lambda T, F, q, k, v: F.scaled_dot_product_attention(q, k, v),
    ),
    "binary_cross_entropy": (
        [(3, 4), (3, 4)],
        lambda T, F, a, b: F.binary_cross_entropy(a.sigmoid(), b.sigmoid()),
    ),
    "polar": ([(3, 4), (3, 4)], lambda T, F, a, b: T.polar(a.abs(), b)),
    "pad_reflect": ([(1, 2, 4, 4)], lambda T, F, x: F.pad(x, (1, 1, 1, 1), mode="reflect")),
    "pad_replicate": ([(1, 2, 4, 4)], lambda T, F, x: F.pad(x, (1, 1, 1, 1), mode="replicate")),
    "dot": ([(4,), (4,)], lambda T, F, a, b: T.dot(a, b)),
    "mv": ([(3, 4), (4,)], lambda T, F, a, b: T.mv(a, b)),
    "outer": ([(3,), (4,)], lambda T, F, a, b: T.outer(a, b)),
    "avg_pool2d": ([(1, 2, 4, 4)], lambda T, F, x: F.avg_pool2d(x, 2)),
}

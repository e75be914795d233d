"""``nn.functional`` cases of the PyTorch compatibility table: activations, softmax, dropout in
eval, linear, embedding, one_hot, normalization, convolution, pooling, padding, interpolation.
"""

from __future__ import annotations

from typing import Any

from tests.compat.tensor_harness import Case, const, ints, make, normal, positive

X = normal(3, 4)
IMG = normal(1, 4, 5, 6)


def c(id: str, fn: Any, *makers: Any, **options: Any) -> Case:
    return Case(id, fn, make(*makers), **options)


ACTIVATION = [
    c("relu", lambda L, x: (L.F.relu(x), L.F.relu6(x * 4), L.F.hardtanh(x * 2)), X),
    c("leaky_relu_default", lambda L, x: L.F.leaky_relu(x * 10), X),
    c("leaky_relu_slope", lambda L, x: L.F.leaky_relu(x, 0.2), X),
    c("leaky_relu_module", lambda L, x: L.nn.LeakyReLU()(x), X, compiled=False),
    c("elu", lambda L, x: (L.F.elu(x), L.F.elu(x, alpha=0.5), L.F.selu(x)), X),
    c("gelu", lambda L, x: (L.F.gelu(x), L.F.gelu(x, approximate="tanh")), X),
    c("silu_sigmoid_tanh", lambda L, x: (L.F.silu(x), L.F.sigmoid(x), L.F.tanh(x)), X),
    c("softplus", lambda L, x: (L.F.softplus(x), L.F.softplus(x, beta=2, threshold=1)), X),
    c("logsigmoid", lambda L, x: L.F.logsigmoid(x * 5), X),
    c("softmax", lambda L, x: (L.F.softmax(x, dim=1), L.F.log_softmax(x, dim=0)), X),
    c("softmax_3d", lambda L, x: L.F.softmax(x, -1), normal(2, 3, 4)),
    c(
        "dropout_eval",
        lambda L, x: (L.F.dropout(x, 0.5, training=False), L.F.dropout(x, 0.0)),
        X,
    ),
    c("normalize", lambda L, x: (L.F.normalize(x), L.F.normalize(x, p=1, dim=0)), X),
    c("cosine_similarity", lambda L, a, b: L.F.cosine_similarity(a, b), X, X),
]

LAYERS = [
    c("linear", lambda L, x, w, b: L.F.linear(x, w, b), X, normal(5, 4), normal(5)),
    c("linear_3d_nobias", lambda L, x, w: L.F.linear(x, w), normal(2, 3, 4), normal(5, 4)),
    c("embedding", lambda L, i, w: L.F.embedding(i, w), ints(6, 2, 3), normal(6, 4)),
    c(
        "embedding_padding",
        lambda L, i, w: L.F.embedding(i, w, padding_idx=0),
        ints(6, 2, 5),
        normal(6, 4),
    ),
    c("one_hot", lambda L, i: (L.F.one_hot(i), L.F.one_hot(i, num_classes=7)), ints(5, 6)),
    c(
        "batch_norm_train",
        lambda L, x, m, v, w, b: (L.F.batch_norm(x, m, v, w, b, training=True, momentum=0.3), m, v),
        normal(4, 3, 2, 2),
        normal(3),
        positive(3),
        positive(3),
        normal(3),
        grad=(0, 3, 4),
    ),
    c(
        "batch_norm_eval",
        lambda L, x, m, v: L.F.batch_norm(x, m, v),
        normal(4, 3),
        normal(3),
        positive(3),
        grad=(0,),
    ),
    c(
        "batch_norm_no_stats",
        lambda L, x: L.F.batch_norm(x, None, None, training=True),
        normal(5, 3),
    ),
    c(
        "layer_norm",
        lambda L, x, w, b: (L.F.layer_norm(x, (4,), w, b), L.F.layer_norm(x, [3, 4])),
        normal(2, 3, 4),
        normal(4),
        normal(4),
    ),
    c(
        "group_norm",
        lambda L, x, w, b: L.F.group_norm(x, 2, w, b),
        normal(2, 4, 3),
        normal(4),
        normal(4),
    ),
]

CONV = [
    c(
        "conv2d",
        lambda L, x, w, b: L.F.conv2d(x, w, b, stride=2, padding=1),
        IMG,
        normal(5, 4, 3, 3),
        normal(5),
    ),
    c(
        "conv2d_groups",
        lambda L, x, w: L.F.conv2d(x, w, None, 1, (1, 2), (2, 1), 2),
        IMG,
        normal(6, 2, 3, 2),
    ),
    c("conv2d_same", lambda L, x, w: L.F.conv2d(x, w, padding="same"), IMG, normal(3, 4, 2, 3)),
    c("conv2d_valid", lambda L, x, w: L.F.conv2d(x, w, padding="valid"), IMG, normal(3, 4, 3, 3)),
    c(
        "conv_transpose2d",
        lambda L, x, w, b: L.F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        normal(2, 4, 3, 3),
        normal(4, 3, 3, 3),
        normal(3),
    ),
    c(
        "conv_transpose2d_groups",
        lambda L, x, w: L.F.conv_transpose2d(x, w, groups=2, dilation=2),
        normal(1, 4, 3, 3),
        normal(4, 1, 2, 2),
    ),
    c(
        "conv1d",
        lambda L, x, w, b: L.F.conv1d(x, w, b, stride=2, padding=1, dilation=1),
        normal(2, 3, 9),
        normal(4, 3, 3),
        normal(4),
    ),
]

POOL = [
    c(
        "max_pool2d",
        lambda L, x: (L.F.max_pool2d(x, 2), L.F.max_pool2d(x, kernel_size=3, stride=2, padding=1)),
        IMG,
    ),
    c("avg_pool2d", lambda L, x: (L.F.avg_pool2d(x, 2), L.F.avg_pool2d(x, 3, 2, 1)), IMG),
    c(
        "avg_pool2d_exclude_pad",
        lambda L, x: L.F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
        IMG,
    ),
    c("avg_pool2d_divisor", lambda L, x: L.F.avg_pool2d(x, 2, divisor_override=3), IMG),
    c("pool1d", lambda L, x: (L.F.max_pool1d(x, 2), L.F.avg_pool1d(x, 3, 2, 1)), normal(2, 3, 9)),
    c(
        "adaptive_avg_pool2d",
        lambda L, x: (
            L.F.adaptive_avg_pool2d(x, 1),
            L.F.adaptive_avg_pool2d(x, (2, 3)),
            L.F.adaptive_avg_pool2d(x, (None, 4)),
        ),
        IMG,
    ),
    c("adaptive_avg_pool2d_divisible", lambda L, x: L.F.adaptive_avg_pool2d(x, (3, 7)), IMG),
]

RESAMPLE = [
    c("pad_constant", lambda L, x: (L.F.pad(x, (1, 2)), L.F.pad(x, (1, 0, 2, 1), value=0.5)), IMG),
    c(
        "pad_modes",
        lambda L, x: (
            L.F.pad(x, (1, 2, 2, 1), mode="reflect"),
            L.F.pad(x, (2, 1, 0, 3), mode="replicate"),
            L.F.pad(x, (1, 2, 3, 1), mode="circular"),
        ),
        IMG,
    ),
    c("pad_3d", lambda L, x: L.F.pad(x, (2, 1), mode="reflect"), normal(2, 3, 5)),
    c(
        "interpolate_nearest",
        lambda L, x: (L.F.interpolate(x, scale_factor=2), L.F.interpolate(x, size=(5, 9))),
        IMG,
    ),
    c(
        "interpolate_nearest_frac",
        lambda L, x: (
            L.F.interpolate(x, scale_factor=1.5),
            L.F.interpolate(x, size=4, mode="nearest-exact"),
        ),
        IMG,
    ),
    c(
        "interpolate_bilinear",
        lambda L, x: (
            L.F.interpolate(x, size=(9, 5), mode="bilinear"),
            L.F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
        ),
        IMG,
    ),
    c(
        "interpolate_bilinear_frac",
        lambda L, x: L.F.interpolate(x, scale_factor=1.7, mode="bilinear"),
        IMG,
    ),
    c(
        "interpolate_linear",
        lambda L, x: L.F.interpolate(x, size=8, mode="linear"),
        normal(2, 3, 5),
    ),
    c(
        "pixel_shuffle",
        lambda L, x: (L.F.pixel_shuffle(x, 2), L.F.pixel_unshuffle(L.F.pixel_shuffle(x, 2), 2)),
        normal(2, 8, 3, 2),
    ),
]

ERRORS = [
    c("conv2d_dtype_error", lambda L, x, w: L.F.conv2d(x, w.float()), IMG, normal(3, 4, 3, 3)),
    c("linear_shape_error", lambda L, x, w: L.F.linear(x, w), X, normal(5, 3)),
    c("one_hot_float_error", lambda L, x: L.F.one_hot(x), X, grad=()),
    c("softmax_dim_error", lambda L, x: L.F.softmax(x, dim=3), X),
    c("max_pool2d_size_error", lambda L, x, k: L.F.max_pool2d(x, k), IMG, const(9)),
]

CASES = ACTIVATION + LAYERS + CONV + POOL + RESAMPLE + ERRORS

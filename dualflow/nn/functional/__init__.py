"""``dualflow.nn.functional`` (import as ``F``): PyTorch's ``torch.nn.functional`` names,
signatures and meanings, built on ``dualflow.ops``.

``F.relu``, ``F.conv2d(input, weight, bias, stride, padding, dilation, groups)``,
``F.max_pool2d(kernel_size=...)``, ``F.log_softmax(x, dim=1)``, ``F.cross_entropy(...,
ignore_index=, label_smoothing=)``... A PyTorch name that dualflow lacks raises an
AttributeError saying what to use instead.
"""

from __future__ import annotations

from typing import Any

from dualflow.nn.functional.activation import (
    cosine_similarity,
    dropout,
    dropout2d,
    elu,
    gelu,
    hardtanh,
    leaky_relu,
    log_softmax,
    logsigmoid,
    normalize,
    relu,
    relu6,
    selu,
    sigmoid,
    silu,
    softmax,
    softplus,
    tanh,
)
from dualflow.nn.functional.layers import (
    batch_norm,
    embedding,
    group_norm,
    layer_norm,
    linear,
    one_hot,
)
from dualflow.nn.functional.loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from dualflow.nn.functional.ported import (
    dropout1d,
    dropout3d,
    embedding_bag,
    prelu,
    scaled_dot_product_attention,
)
from dualflow.nn.functional.resample import (
    interpolate,
    pixel_shuffle,
    pixel_unshuffle,
    upsample,
)
from dualflow.nn.functional.spatial import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    conv_transpose2d,
    max_pool1d,
    max_pool2d,
    pad,
)
from dualflow.tensor.methods.hints import missing

_HINTS = {
    "conv3d": "3-D convolutions are not supported; fold the depth into the batch for conv2d",
    "conv_transpose1d": "use conv_transpose2d on x.unsqueeze(2) with weight.unsqueeze(2)",
    "max_pool3d": "3-D pooling is not supported",
    "avg_pool3d": "3-D pooling is not supported",
    "adaptive_max_pool2d": "use max_pool2d with kernel_size = stride = input size // output size",
    "instance_norm": "use group_norm(x, num_groups=C)",
    "local_response_norm": "compose it from avg_pool2d over squared channels",
    "grid_sample": "not supported; use interpolate for regular resampling",
    "affine_grid": "not supported",
    "unfold": "not supported; use ops.conv2d with an identity kernel to extract patches",
    "fold": "not supported; use conv_transpose2d with an identity kernel",
    "ctc_loss": "not supported",
    "poisson_nll_loss": "use (input.exp() - target * input).mean() (log_input=True form)",
    "gaussian_nll_loss": "use (0.5 * (var.log() + (input - target) ** 2 / var)).mean()",
    "margin_ranking_loss": "use relu(-y * (x1 - x2) + margin).mean()",
    "hinge_embedding_loss": "compose it with where() and relu()",
    "soft_margin_loss": "use softplus(-y * x).mean()",
    "multilabel_soft_margin_loss": "use binary_cross_entropy_with_logits(x, y)",
    "cosine_embedding_loss": "compose it from cosine_similarity and relu",
    "triplet_margin_loss": "use relu(pairwise_distance(a, p) - pairwise_distance(a, n) + m)",
    "multi_margin_loss": "compose it from gather and relu",
    "pairwise_distance": "use (x1 - x2 + eps).norm(dim=-1)",
    "glu": "use a, b = x.chunk(2, dim); a * sigmoid(b)",
    "mish": "use x * tanh(softplus(x))",
    "hardswish": "use x * relu6(x + 3) / 6",
    "hardsigmoid": "use relu6(x + 3) / 6",
    "softsign": "use x / (1 + x.abs())",
    "tanhshrink": "use x - tanh(x)",
    "rrelu": "use leaky_relu with a fixed slope",
    "celu": "use elu for alpha=1",
    "threshold": "use where(x > threshold, x, value)",
    "softmin": "use softmax(-x, dim)",
    "gumbel_softmax": "use softmax((logits - log(-log(u))) / tau, dim) with u uniform",
    "alpha_dropout": "use dropout",
    "feature_alpha_dropout": "use dropout2d",
    "multi_head_attention_forward": "use nn.MultiheadAttention",
    "upsample_nearest": "use interpolate(x, size, scale_factor, mode='nearest')",
    "upsample_bilinear": "use interpolate(x, size, scale_factor, mode='bilinear', "
    "align_corners=True)",
}


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise missing("module 'dualflow.nn.functional'", f"F.{name}", name, _HINTS, lambda: __all__)


__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "elu",
    "embedding",
    "embedding_bag",
    "gelu",
    "group_norm",
    "hardtanh",
    "huber_loss",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsigmoid",
    "max_pool1d",
    "max_pool2d",
    "mse_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "pixel_shuffle",
    "pixel_unshuffle",
    "prelu",
    "relu",
    "relu6",
    "scaled_dot_product_attention",
    "selu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softplus",
    "tanh",
    "upsample",
]

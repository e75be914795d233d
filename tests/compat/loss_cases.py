"""Loss cases of the PyTorch compatibility table: every loss function and module with its
options (weight, ignore_index, label_smoothing, probability targets, pos_weight, reductions).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.compat.tensor_harness import Case, ints, make, normal, positive, prob

LOGITS = normal(5, 4)
LABELS = ints(4, 5)
P = prob(3, 4)


def c(id: str, fn: Any, *makers: Any, **options: Any) -> Case:
    return Case(id, fn, make(*makers), **options)


def ignored(rng: np.random.Generator) -> np.ndarray:
    """Labels with two entries set to PyTorch's default ignore_index -100."""
    labels = rng.integers(0, 4, 6).astype(np.int64)
    labels[[1, 4]] = -100
    return labels


def soft(rng: np.random.Generator) -> np.ndarray:
    """Class probabilities (rows summing to 1) for (5, 4) logits."""
    raw = rng.uniform(0.1, 1.0, (5, 4))
    return raw / raw.sum(1, keepdims=True)


# Cases that build a loss Module inside the call are not compiled (a compiled function cannot
# create Modules); tests/nn/test_loss_modules.py compiles modules built outside.
CROSS_ENTROPY = [
    c("ce", lambda L, x, t: L.F.cross_entropy(x, t), LOGITS, LABELS),
    c(
        "ce_reductions",
        lambda L, x, t: (
            L.F.cross_entropy(x, t, reduction="sum"),
            L.F.cross_entropy(x, t, reduction="none"),
        ),
        LOGITS,
        LABELS,
    ),
    c("ce_ignore", lambda L, x, t: L.F.cross_entropy(x, t), normal(6, 4), ignored),
    c(
        "ce_ignore_index",
        lambda L, x, t: L.F.cross_entropy(x, t, ignore_index=2, reduction="none"),
        LOGITS,
        LABELS,
    ),
    c(
        "ce_weight",
        lambda L, x, t, w: L.F.cross_entropy(x, t, weight=w),
        LOGITS,
        LABELS,
        positive(4),
        grad=(0,),
    ),
    c(
        "ce_weight_ignore",
        lambda L, x, t, w: L.F.cross_entropy(x, t, w, ignore_index=-100),
        normal(6, 4),
        ignored,
        positive(4),
        grad=(0,),
    ),
    c(
        "ce_smoothing",
        lambda L, x, t: L.F.cross_entropy(x, t, label_smoothing=0.1),
        normal(6, 4),
        ignored,
    ),
    c(
        "ce_smoothing_weight",
        lambda L, x, t, w: L.F.cross_entropy(x, t, w, label_smoothing=0.2),
        LOGITS,
        LABELS,
        positive(4),
        grad=(0,),
    ),
    c(
        "ce_smoothing_none",
        lambda L, x, t, w: L.F.cross_entropy(x, t, w, reduction="none", label_smoothing=0.3),
        normal(6, 4),
        ignored,
        positive(4),
        grad=(0,),
    ),
    c("ce_probabilities", lambda L, x, p: L.F.cross_entropy(x, p), LOGITS, soft, grad=(0,)),
    c(
        "ce_probabilities_smooth",
        lambda L, x, p, w: L.F.cross_entropy(x, p, w, label_smoothing=0.1, reduction="sum"),
        LOGITS,
        soft,
        positive(4),
        grad=(0,),
    ),
    c("ce_spatial", lambda L, x, t: L.F.cross_entropy(x, t), normal(2, 4, 3, 2), ints(4, 2, 3, 2)),
    c("ce_unbatched", lambda L, x, t: L.F.cross_entropy(x, t), normal(4), ints(4)),
    c(
        "ce_module",
        lambda L, x, t, w: L.nn.CrossEntropyLoss(weight=w, label_smoothing=0.05)(x, t),
        LOGITS,
        LABELS,
        positive(4),
        grad=(0,),
        compiled=False,
    ),
]

OTHERS = [
    c("nll", lambda L, x, t: L.F.nll_loss(x.log_softmax(1), t), LOGITS, LABELS),
    c(
        "nll_weight_ignore",
        lambda L, x, t, w: L.F.nll_loss(x, t, w, reduction="none"),
        normal(6, 4),
        ignored,
        positive(4),
        grad=(0,),
    ),
    c(
        "nll_weight_mean",
        lambda L, x, t, w: L.F.nll_loss(x, t, w),
        normal(6, 4),
        ignored,
        positive(4),
        grad=(0,),
    ),
    c("bce", lambda L, p, t: L.F.binary_cross_entropy(p, t), P, P),
    c(
        "bce_weight",
        lambda L, p, t, w: L.F.binary_cross_entropy(p, t, w, reduction="none"),
        P,
        P,
        positive(4),
        grad=(0, 1),
    ),
    c(
        "bce_logits",
        lambda L, x, t: L.F.binary_cross_entropy_with_logits(x * 5, t),
        normal(3, 4),
        P,
    ),
    c(
        "bce_logits_pos_weight",
        lambda L, x, t, pw: L.F.binary_cross_entropy_with_logits(x, t, pos_weight=pw),
        normal(3, 4),
        P,
        positive(4),
        grad=(0, 1),
    ),
    c(
        "bce_logits_weight",
        lambda L, x, t, w: L.F.binary_cross_entropy_with_logits(x, t, w, reduction="none"),
        normal(3, 4),
        P,
        positive(4),
        grad=(0,),
    ),
    c(
        "mse",
        lambda L, x, y: (L.F.mse_loss(x, y), L.F.mse_loss(x, y, reduction="sum")),
        normal(3, 4),
        normal(3, 4),
    ),
    c(
        "l1",
        lambda L, x, y: (L.F.l1_loss(x, y), L.F.l1_loss(x, y, reduction="none")),
        normal(3, 4),
        normal(3, 4),
    ),
    c(
        "smooth_l1",
        lambda L, x, y: (
            L.F.smooth_l1_loss(x, y),
            L.F.smooth_l1_loss(x, y, beta=0.5, reduction="none"),
        ),
        normal(3, 4),
        normal(3, 4),
    ),
    c(
        "huber",
        lambda L, x, y: (L.F.huber_loss(x, y), L.F.huber_loss(x, y, delta=0.5, reduction="sum")),
        normal(3, 4),
        normal(3, 4),
    ),
    c(
        "kl_div",
        lambda L, x, t: (
            L.F.kl_div(x.log_softmax(1), t, reduction="batchmean"),
            L.F.kl_div(x.log_softmax(1), t, reduction="sum"),
            L.F.kl_div(x, t),
        ),
        normal(5, 4),
        soft,
    ),
    c(
        "kl_div_log_target",
        lambda L, x, t: L.F.kl_div(x, t.log(), reduction="none", log_target=True),
        normal(5, 4),
        soft,
    ),
    c(
        "kl_div_zero_target",
        lambda L, x, t: L.F.kl_div(x, t * (t > 0.25), reduction="batchmean"),
        normal(5, 4),
        soft,
        grad=(0,),
    ),
]

# Every loss module once (built inside the call, so not compiled here).
MODULES = [
    c(
        "modules",
        lambda L, x, y, p, t: (
            L.nn.NLLLoss()(x.log_softmax(1), t),
            L.nn.BCELoss(reduction="sum")(p, p.detach() * 0.5),
            L.nn.BCEWithLogitsLoss()(x, p),
            L.nn.MSELoss(reduction="none")(x, y),
            L.nn.L1Loss(reduction="sum")(x, y),
            L.nn.SmoothL1Loss(beta=2.0)(x, y),
            L.nn.HuberLoss(delta=2.0)(x, y),
            L.nn.KLDivLoss(reduction="batchmean")(x.log_softmax(1), p),
        ),
        normal(3, 4),
        normal(3, 4),
        prob(3, 4),
        ints(4, 3),
        compiled=False,
    ),
    c(
        "bce_logits_module",
        lambda L, x, t, pw: L.nn.BCEWithLogitsLoss(pos_weight=pw, reduction="sum")(x, t),
        normal(3, 4),
        P,
        positive(4),
        grad=(0,),
        compiled=False,
    ),
]

ERRORS = [
    c("ce_label_out_of_range", lambda L, x, t: L.F.cross_entropy(x, t + 4), LOGITS, LABELS),
    c(
        "ce_weighted_label_out_of_range",
        lambda L, x, t, w: L.F.cross_entropy(x, t + 4, w),
        LOGITS,
        LABELS,
        positive(4),
        grad=(0,),
    ),
    c("ce_target_shape_error", lambda L, x, t: L.F.cross_entropy(x, t[:3]), LOGITS, LABELS),
    c("ce_float_target_shape_error", lambda L, x, p: L.F.cross_entropy(x, p[:, :3]), LOGITS, soft),
    c("nll_float_target_error", lambda L, x, t: L.F.nll_loss(x, t), LOGITS, prob(5), grad=(0,)),
    c("bce_shape_error", lambda L, p, t: L.F.binary_cross_entropy(p, t[0]), P, P),
]

CASES = CROSS_ENTROPY + OTHERS + MODULES + ERRORS

"""Which batching rule each op has: attaches the rules to the ``OpDef``s (their ``batch`` fact)
at import, and lists, each with its reason, the ops vmap runs once per example
(``LOOP_FALLBACK``) and the ops that never receive a batched input (``NOT_BATCHED``).

Every registered op is in exactly one of: a rule, ``LOOP_FALLBACK``, ``NOT_BATCHED``
(``tests/func/test_batch_rules.py`` checks it, and compares every op-table entry under vmap
with a Python loop, eagerly and compiled).
"""

from __future__ import annotations

from dualflow.func import batch_rules as core
from dualflow.func import batch_rules_shape as shape
from dualflow.func import batch_rules_spatial as spatial
from dualflow.ops.registry import OPS

RULES = {
    name: core.same_dim if name == "cast" else core.elementwise
    for name, op in OPS.items()
    if op.kind == "elementwise"
}
RULES.update(
    matmul=core.matmul,
    sum=core.reduction,
    prod=core.reduction,
    max=core.reduction,
    min=core.reduction,
    argmax=core.arg_reduction,
    argmin=core.arg_reduction,
    softmax=core.along_axis,
    log_softmax=core.along_axis,
    argsort=core.along_axis,
    flip=core.along_axis,
    cumsum=core.cumulative,
    cumprod=core.cumulative,
    logcumsumexp=core.cumulative,
    cummax=core.cumulative,
    cummin=core.cumulative,
    softmax_cross_entropy=core.softmax_cross_entropy,
    softmax_cross_entropy_grad=core.softmax_cross_entropy_grad,
    copy=core.same_dim,
    stop_gradient=core.same_dim,
    full_like=core.same_dim,
    allreduce=core.allreduce,
    allreduce_start=core.allreduce_start,
    allreduce_wait=core.allreduce,
    reshape=shape.reshape,
    transpose=shape.transpose,
    broadcast_to=shape.broadcast_to,
    sum_to=shape.sum_to,
    pad=shape.pad,
    one_hot=shape.one_hot,
    concat=shape.concat,
    sum_slice_grads=shape.sum_slice_grads,
    getitem=shape.getitem,
    getitem_grad=shape.getitem_grad,
    getitem_array=shape.getitem_array,
    getitem_array_grad=shape.getitem_array_grad,
    take_along_axis=shape.take_along_axis,
    take_along_axis_grad=shape.take_along_axis_grad,
    assign=shape.assign,
    conv2d=spatial.folded,
    conv_transpose2d=spatial.folded,
    avg_pool2d=spatial.folded,
    avg_pool2d_grad=spatial.folded,
    max_pool2d=spatial.folded,
    max_pool2d_gather=spatial.folded,
    max_pool2d_grad=spatial.folded,
    conv2d_grad_weight=spatial.conv2d_grad_weight,
    batch_norm=spatial.batch_norm,
    batch_norm_grad=spatial.batch_norm_grad,
    layer_norm=spatial.layer_norm,
    embedding=spatial.embedding,
    embedding_grad=spatial.embedding_grad,
)

_BATCHED_KEY = "a batched random key: one draw per example's key (vmap's randomness modes "
_BATCHED_KEY += "handle unbatched keys without a loop: batching.BatchLevel._random)"
LOOP_FALLBACK: dict[str, str] = {
    "random_normal": _BATCHED_KEY,
    "random_uniform": _BATCHED_KEY,
    "dropout_mask": _BATCHED_KEY,
    "debug_print": "prints each example's values, one line per example (host output)",
    "lstm_scan": "a whole recurrence with its own batch axis; vmapped weights would need a "
    "batched recurrence (the loop runs one scan per example)",
    "lstm_scan_grad": "lstm_scan's backward recurrence, batched as lstm_scan is: one scan per "
    "example",
    "gru_scan": "a whole recurrence with its own batch axis, as lstm_scan",
    "gru_scan_grad": "gru_scan's backward recurrence, batched as gru_scan is",
    "layer_norm_grad": "its weight gradients sum over every row: one call per example keeps "
    "each example's sums apart",
    "adam_update": "an optimizer step on one parameter, its 0-d hyperparameters shared: one "
    "call per example (ensembles of optimizer states step one member at a time)",
}
NOT_BATCHED: dict[str, str] = {
    "arange": "no tensor input",
    "full": "no tensor input",
    "allreduce_progress": "takes a split collective's handle only, never a batched tensor",
    "guard": "a compiler node (speculation check), never called eagerly",
    "fused": "a compiler node (fusion region), never called eagerly",
    "softmax_cross_entropy_and_grad": "a compiler node (``loss_with_grad``: a loss and its "
    "gradient merged in an optimized plan), after every transform",
}


def attach() -> None:
    """Give every op its rule (``OpDef.batch``); idempotent.

    Example:
        >>> attach(); OPS["matmul"].batch is RULES["matmul"]
        True
    """
    for name, rule in RULES.items():
        OPS[name].batch = rule


attach()

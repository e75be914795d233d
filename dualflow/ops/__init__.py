"""Every dualflow op, defined once (DESIGN §2), and its public function ``dualflow.ops.<name>``.

``OPS`` maps each registered op name to its definition; importing this package registers them all.

Import cycle: ``dispatch`` runs every call, the elementwise ops' generated functions
(``registry``) and ``arithmetic`` call its ``apply``, and ``dispatch`` casts under autocast with
``autocast``, which casts by ``arithmetic``'s ``cast`` op: the ops are calls through the dispatcher
that the dispatcher itself makes. The imports back into ``dispatch`` are at call time.
"""

from dualflow.ops.registry import OPS, Meta, OpDef  # noqa: I001 - the registry comes first
from dualflow.ops.arithmetic import (
    abs,
    add,
    atan,
    cast,
    clip,
    cos,
    divide,
    equal,
    erf,
    exp,
    expm1,
    floor_divide,
    fmod,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log1p,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    power,
    remainder,
    rsqrt,
    sin,
    sqrt,
    square,
    subtract,
    where,
)
from dualflow.ops.activation import (
    elu,
    gelu,
    gelu_tanh,
    leaky_relu,
    relu,
    relu_grad,
    sigmoid,
    silu,
    softplus,
    tanh,
    tanh_grad,
    sigmoid_grad,
)
from dualflow.ops.shape import (
    broadcast_to,
    expand_dims,
    flatten,
    reshape,
    squeeze,
    sum_to,
    transpose,
)
from dualflow.ops.reduction import (
    argmax,
    argmin,
    logsumexp,
    max,
    mean,
    min,
    prod,
    std,
    stop_gradient,
    sum,
    var,
)
from dualflow.ops.linalg import linear, matmul
from dualflow.ops.conv import conv2d, conv2d_grad_weight, conv_transpose2d
from dualflow.ops.pooling import (
    avg_pool2d,
    avg_pool2d_grad,
    global_avg_pool2d,
    max_pool2d,
    max_pool2d_gather,
    max_pool2d_grad,
)
from dualflow.ops.state import assign
from dualflow.ops.creation import (
    arange,
    copy,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from dualflow.ops.join import concat, split, stack
from dualflow.ops.slice_sums import sum_slice_grads
from dualflow.ops.indexing import getitem, getitem_grad
from dualflow.ops.slicing import flip
from dualflow.ops.cumulative import cummax, cummin, cumprod, cumsum, logcumsumexp
from dualflow.ops.gather import argsort, scatter_add, take_along_axis, take_along_axis_grad
from dualflow.ops.padding import pad
from dualflow.ops.softmax import log_softmax, softmax
from dualflow.ops.loss import (
    mean_squared_error,
    one_hot,
    sigmoid_cross_entropy,
    softmax_cross_entropy,
    softmax_cross_entropy_grad,
)
from dualflow.ops.loss_with_grad import softmax_cross_entropy_and_grad
from dualflow.ops.layer_norm import layer_norm, layer_norm_grad
from dualflow.ops.adam_update import adam_update
from dualflow.ops.normalization import batch_norm
from dualflow.ops.normalization_grad import batch_norm_grad
from dualflow.ops.random_ops import (
    dropout,
    dropout_mask,
    random_normal,
    random_uniform,
)
from dualflow.ops.embedding import embedding, embedding_grad
from dualflow.ops.recurrent import lstm_scan
from dualflow.ops.recurrent_grad import lstm_scan_grad
from dualflow.ops.recurrent_gru_grad import gru_scan_grad
from dualflow.ops.recurrent_gru import gru_scan
from dualflow.ops.fused_arith import fma
from dualflow.ops.collective import allreduce
from dualflow.ops.host_print import debug_print
from dualflow.ops.synthetic import FUSED, GUARD  # the IR's guard and fused nodes

# Every public op function imported above (helpers and modules excluded).
__all__ = sorted(
    name for name, value in globals().items() if callable(value) and not name.startswith("_")
)

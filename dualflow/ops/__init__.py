"""Every dualflow op, defined once (DESIGN §2), and its public function ``dualflow.ops.<name>``.

``OPS`` maps each registered op name to its definition; importing this package registers them all.
"""

from dualflow.ops.registry import OPS, Meta, OpDef  # noqa: I001 - the registry comes first
from dualflow.ops.arithmetic import (
    abs,
    add,
    cast,
    clip,
    cos,
    divide,
    equal,
    erf,
    exp,
    expm1,
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
    std,
    stop_gradient,
    sum,
    var,
)
from dualflow.ops.linalg import linear, matmul
from dualflow.ops.state import assign

# Every public op function imported above (helpers and modules excluded).
__all__ = sorted(
    name for name, value in globals().items() if callable(value) and not name.startswith("_")
)

"""vmap's batching rules for convolution, pooling, batch norm and embedding (see
``batch_rules``): examples folded into the op's own batch axis (N) when only the input is
batched, into its channels (with ``groups`` times the batch) when the weights are, and
embedding tables stacked with each example's ids offset into its own table."""

from __future__ import annotations

from dualflow.func.batch_rules import batched, front
from dualflow.func.batching import per_example
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import OPS, OpDef
from dualflow.tensor.core import Tensor


def _reshape(x: Tensor, shape: tuple) -> Tensor:
    return apply(OPS["reshape"], x, shape=shape)


def _fold(x: Tensor) -> Tensor:
    """(B, N, ...) -> (B*N, ...)."""
    return _reshape(x, (x.shape[0] * x.shape[1], *x.shape[2:]))


def _unfold(y: Tensor, size: int) -> Tensor:
    return _reshape(y, (size, y.shape[0] // size, *y.shape[1:]))


def _into_channels(x: Tensor) -> Tensor:
    """(B, N, C, ...) -> (N, B*C, ...): each example's channels a group of their own."""
    x = apply(OPS["transpose"], x, axes=(1, 0, *range(2, x.ndim)))
    return _reshape(x, (x.shape[0], x.shape[1] * x.shape[2], *x.shape[3:]))


def _channels_out(y: Tensor, size: int) -> Tensor:
    """(N, B*C, ...) -> (N, B, C, ...): the batch at dimension 1."""
    return _reshape(y, (y.shape[0], size, y.shape[1] // size, *y.shape[2:]))


def folded(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """Ops over (N, C, H, W) inputs that treat every image alike (pooling, their gradient
    helpers, a convolution with shared weights): the examples' images as one batch of B*N."""
    if op.name in ("conv2d", "conv_transpose2d") and dims[1] is not None:
        return grouped(op, args, dims, attrs, size)
    if op.name in ("conv2d", "conv_transpose2d"):  # shared weights
        xs = [_fold(front(args[0], dims[0])), args[1]]
    else:
        xs = [_fold(batched(a, d, size)) for a, d in zip(args, dims)]
    return _unfold(apply(op, *xs, **attrs), size), 0


def grouped(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """conv2d / conv_transpose2d with per-example weights: a grouped convolution whose groups
    are the examples (times the op's own groups)."""
    x = _into_channels(batched(args[0], dims[0], size))
    w = front(args[1], dims[1])
    w = _reshape(w, (size * w.shape[1], *w.shape[2:]))
    out = apply(op, x, w, **{**attrs, "groups": attrs["groups"] * size})
    return _channels_out(out, size), 1


def conv2d_grad_weight(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """Each example's weight gradient: a grouped weight gradient over examples' channels."""
    x = _into_channels(batched(args[0], dims[0], size))
    gy = _into_channels(batched(args[1], dims[1], size))
    g = apply(op, x, gy, **{**attrs, "groups": attrs["groups"] * size})
    return _reshape(g, (size, g.shape[0] // size, *g.shape[1:])), 0


def batch_norm(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """Each example's statistics: its channels as B*C channels of one batch norm."""
    x = _into_channels(batched(args[0], dims[0], size))
    gamma, beta = (_reshape(batched(a, d, size), (-1,)) for a, d in zip(args[1:], dims[1:]))
    y, mean, var = apply(op, x, gamma, beta, **attrs)
    per = (size, mean.shape[0] // size)
    return (_channels_out(y, size), _reshape(mean, per), _reshape(var, per)), (1, 0, 0)


def batch_norm_grad(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """Each example's gradients: its channels as B*C channels of one batch norm's backward."""
    gy, x = (_into_channels(batched(a, d, size)) for a, d in zip(args[:2], dims[:2]))
    stats = (_reshape(batched(a, d, size), (-1,)) for a, d in zip(args[2:], dims[2:]))
    gx, ggamma, gbeta = apply(op, gy, x, *stats, **attrs)
    per = (size, ggamma.shape[0] // size)
    return (_channels_out(gx, size), _reshape(ggamma, per), _reshape(gbeta, per)), (1, 0, 0)


def layer_norm(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """Every example's rows as leading rows of one layer norm when the weights are shared; one
    layer norm per example when they are batched (the weights are per row's last axes)."""
    if dims[1] is None and dims[2] is None:
        return apply(op, front(args[0], dims[0]), *args[1:], **attrs), (0, 0, 0)
    return per_example(op, args, dims, attrs, size)


def _offsets(ids: Tensor, d: int | None, num: int, size: int) -> Tensor:
    """Each example's ids moved into its own block of ``num`` rows (ids batched at 0)."""
    ids = batched(ids, d, size)
    start = apply(OPS["arange"], start=0, stop=size * num, step=num, dtype=str(ids.dtype))
    start = _reshape(start, (size, *(1,) * (ids.ndim - 1)))
    return apply(OPS["add"], ids, start)


def embedding(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    (ids, weight), (di, dw) = args, dims
    if dw is None:  # one table: the ids of every example at once
        return apply(op, front(ids, di), weight), 0
    weight = front(weight, dw)
    num = weight.shape[1]
    table = _reshape(weight, (size * num, *weight.shape[2:]))
    return apply(op, _offsets(ids, di, num, size), table), 0


def embedding_grad(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """Each example scatters into its own block of a (B*num, D) table."""
    (gy, ids), (dg, di) = args, dims
    num = attrs["num"]
    g = apply(op, batched(gy, dg, size), _offsets(ids, di, num, size), num=size * num)
    return _reshape(g, (size, num, *g.shape[1:])), 0

"""vmap's batching rules for shape, indexing, joining and state ops: the batch dimension in
front, one more axis in every shape, axis and index template (see ``batch_rules``)."""

from __future__ import annotations

from dualflow.func.batch_rules import batched, front, pad_rank, shift_axes
from dualflow.ops.dispatch import apply
from dualflow.ops.indexspec import ARRAY, FULL
from dualflow.ops.registry import OPS, OpDef
from dualflow.tensor.core import Tensor


def reshape(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    x = front(args[0], dims[0])
    return apply(op, x, shape=(x.shape[0], *attrs["shape"])), 0


def transpose(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    x = front(args[0], dims[0])
    n = x.ndim - 1
    axes = attrs["axes"]
    logical = tuple(range(n - 1, -1, -1)) if axes is None else tuple(a % n for a in axes)
    return apply(op, x, axes=(0, *(a + 1 for a in logical))), 0


def broadcast_to(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    shape = tuple(attrs["shape"])
    x = pad_rank(front(args[0], dims[0]), len(shape))
    return apply(op, x, shape=(x.shape[0], *shape)), 0


def sum_to(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    shape = tuple(attrs["shape"])
    x = front(args[0], dims[0])
    extra = x.ndim - 1 - len(shape)
    if extra > 0:  # the leading axes an example sums away, past the batch
        x = apply(OPS["sum"], x, axis=tuple(range(1, extra + 1)), keepdims=False)
    if x.shape[1:] == shape:
        return x, 0
    return apply(op, x, shape=(x.shape[0], *shape)), 0


def pad(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    x = front(args[0], dims[0])
    return apply(op, x, **{**attrs, "pad_width": ((0, 0), *attrs["pad_width"])}), 0


def one_hot(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    x = front(args[0], dims[0])
    axis = attrs["axis"] % x.ndim + 1  # the result has one axis more than an example
    return apply(op, x, **{**attrs, "axis": axis}), 0


def concat(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    xs = [batched(a, d, size) for a, d in zip(args, dims)]
    return apply(op, *xs, axis=shift_axes(attrs["axis"], xs[0].ndim - 1)), 0


def sum_slice_grads(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    # each piece with the batch in front, read as its piece shape with the batch in front
    xs = [batched(a, d, size) for a, d in zip(args, dims)]
    shapes = tuple((size, *shape) for shape in attrs["shapes"])
    return apply(op, *xs, axis=attrs["axis"] + 1, shapes=shapes), 0


def getitem(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    x = front(args[0], dims[0])
    return apply(op, x, index=(FULL, *attrs["index"])), 0


def getitem_grad(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    gy = front(args[0], dims[0])
    index = (FULL, *attrs["index"])
    return apply(op, gy, shape=(size, *attrs["shape"]), index=index), 0


def _adjacent(index: tuple) -> bool:
    """Whether numpy keeps the advanced index's dimensions in place (its items, arrays and
    ints, are adjacent) rather than moving them to the front."""
    where = [i for i, item in enumerate(index) if item == ARRAY or isinstance(item, int)]
    return where[-1] - where[0] + 1 == len(where)


def _batched_index(idx: Tensor, d: int | None, index: tuple, size: int) -> tuple:
    """A per-example packed index (k, *b) as one over the batch: a first row 0..B-1, so the
    batch dimension leads the result whatever the template."""
    idx = batched(idx, d, size)  # (B, k, *b)
    idx = apply(OPS["transpose"], idx, axes=(1, 0, *range(2, idx.ndim)))
    rows = apply(OPS["arange"], start=0, stop=size, step=1, dtype="int64")
    rows = apply(OPS["reshape"], rows, shape=(1, size, *(1,) * (idx.ndim - 2)))
    rows = apply(OPS["broadcast_to"], rows, shape=(1, *idx.shape[1:]))
    return apply(OPS["concat"], rows, apply(OPS["cast"], idx, dtype="int64"), axis=0), (
        ARRAY,
        *index,
    )


def getitem_array(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """x[arrays]: an unbatched index takes the batch as a whole first axis (which numpy puts
    after the index's dimensions when the advanced items are apart); a batched index gets
    the batch as its first index row."""
    x = batched(args[0], dims[0], size)
    idx, index = args[1], attrs["index"]
    if dims[1] is None:
        out = apply(op, x, idx, index=(FULL, *index))
        return out, 0 if _adjacent(index) else idx.ndim - 1
    packed, template = _batched_index(idx, dims[1], index, size)
    return apply(op, x, packed, index=template), 0


def getitem_array_grad(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """The adjoint of ``getitem_array``'s rule: gy laid out as that rule's result."""
    gy, idx, index = batched(args[0], dims[0], size), args[1], attrs["index"]
    shape = (size, *attrs["shape"])
    if dims[1] is None:
        at = 0 if _adjacent(index) else idx.ndim - 1
        if at:
            axes = (*range(1, at + 1), 0, *range(at + 1, gy.ndim))
            gy = apply(OPS["transpose"], gy, axes=axes)
        return apply(op, gy, idx, shape=shape, index=(FULL, *index)), 0
    packed, template = _batched_index(idx, dims[1], index, size)
    return apply(op, gy, packed, shape=shape, index=template), 0


def take_along_axis(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    x, idx = batched(args[0], dims[0], size), batched(args[1], dims[1], size)
    return apply(op, x, idx, axis=shift_axes(attrs["axis"], x.ndim - 1)), 0


def take_along_axis_grad(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    gy, idx = batched(args[0], dims[0], size), batched(args[1], dims[1], size)
    axis = shift_axes(attrs["axis"], len(attrs["shape"]))
    return apply(op, gy, idx, shape=(size, *attrs["shape"]), axis=axis), 0


def assign(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """An in-place write: into a batched target, the value laid out as the target (each
    example writes its own); into an unbatched one, refused as torch.func does."""
    (target, value), (dt, dv) = args, dims
    if dt is None:
        raise RuntimeError(
            "vmap: an in-place write of a batched value into a tensor that is not batched "
            f"(shape {tuple(target.shape)}) is not possible: each example would write its own "
            "value into the same memory; write out of place instead"
        )
    if dv is not None:
        value = pad_rank(front(value, dv), target.ndim - 1)
        if dt:
            axes = (*range(1, dt + 1), 0, *range(dt + 1, value.ndim))
            value = apply(OPS["transpose"], value, axes=axes)
    elif dt:  # unbatched: the same value for every example, laid out as the target
        shape = target.shape[:dt] + target.shape[dt + 1 :]
        value = apply(OPS["broadcast_to"], value, shape=(size, *shape))
        axes = (*range(1, dt + 1), 0, *range(dt + 1, value.ndim))
        value = apply(OPS["transpose"], value, axes=axes)
    return apply(op, target, value, **attrs), dt

"""What to use instead of PyTorch names dualflow does not have: the text of their AttributeErrors.

``x.median`` on a Tensor (or ``F.grid_sample``) raises an AttributeError that says what to write
in dualflow, so a port fails at the line with the fix instead of with a bare "no attribute".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dualflow.tensor.methods.suggest import MissingName

_NO_STRIDES = "dualflow tensors are numpy/cupy arrays without exposed strides or storage"

TENSOR_HINTS: dict[str, str] = {
    "floor": "no rounding ops; x.long() truncates toward zero",
    "ceil": "no rounding ops; x.long() truncates toward zero",
    "round": "no rounding ops; (x + 0.5).long() rounds non-negative values",
    "trunc": "use x.long() (truncates toward zero)",
    "nonzero": "data-dependent shapes are not supported; use a boolean mask with where()",
    "masked_scatter_": "use x = ops.where(mask, values, x)",
    "index_fill_": "use x[index] = value (in place) or x.index_select/where",
    "index_copy_": "use x[index] = src",
    "bernoulli_": "use x.copy_(dualflow.random.uniform(x.shape) < p)",
    "exponential_": "use x.copy_(-dualflow.ops.log1p(-dualflow.random.uniform(x.shape)) / rate)",
    "register_hook": "tensor hooks are not supported; use dualflow.grad(loss, [x]) for gradients "
    "of intermediates",
    "retain_grad": "non-leaf .grad is not kept; use dualflow.grad(loss, [x]) instead",
    "is_contiguous": f"{_NO_STRIDES}; call x.contiguous() if a C-ordered copy matters",
    "stride": _NO_STRIDES,
    "storage": _NO_STRIDES,
    "data_ptr": f"{_NO_STRIDES}; x.array is the numpy/cupy array (outside compiled code)",
    "untyped_storage": _NO_STRIDES,
    "as_strided": f"{_NO_STRIDES}; use view/permute/expand/getitem",
    "unfold": "use x.view/permute with getitem slices, or ops.conv2d for patches",
    "share_memory_": "use dualflow.distributed (MPI) for multi-process training",
    "pin_memory": "host memory is not pinned; data moves with x.to('cuda')",
    "is_pinned": "host memory is not pinned",
    "addmm": "use bias + x @ w",
    "baddbmm": "use bias + x.bmm(y)",
    "addbmm": "use bias + x.bmm(y).sum(0)",
    "median": "use x.sort(dim).values and index the middle",
    "mode": "not supported; use one_hot counts and argmax",
    "kthvalue": "use x.sort(dim).values[..., k - 1]",
    "bitwise_and": "use & on bool tensors",
    "bitwise_or": "use | on bool tensors",
    "bitwise_not": "use ~ on bool tensors",
    "apply_": "use ops over the whole tensor (or x.numpy() outside compiled code)",
    "map_": "use ops over the whole tensor",
    "grad_fn": "use x.creator (the tape node), or x.is_leaf",
    "names": "named tensors are not supported",
    "cfloat": "use dualflow.complex(real, imag) or dualflow.view_as_complex(x) (complex tensors "
    "computed through their real view)",
    "bfloat16": "bfloat16 is not a numpy dtype; use x.half() (float16)",
    "new_empty_strided": "use x.new_zeros(size)",
}


def missing(
    subject: str,
    torch_name: str,
    name: str,
    hints: dict[str, str],
    candidates: Callable[[], Iterable[str]] = tuple,
    renames: dict[str, str] | None = None,
) -> AttributeError:
    """The AttributeError for ``subject.name``, saying what to use instead when it is known
    (``hints``, then PyTorch's other spellings, then a close match among ``candidates()``).

    Example:
        >>> str(missing("'Tensor' object", "Tensor.median", "median", TENSOR_HINTS))[:66]
        "'Tensor' object has no attribute 'median' (PyTorch's Tensor.median"
    """
    return MissingName(subject, torch_name, name, hints, candidates, renames)

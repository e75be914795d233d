"""The batching interpreter of ``vmap``: a level on the dispatch slot whose tensors carry a
hidden batch dimension, running each op through its ``batch`` rule on the physical arrays.

Inside ``vmap`` the function sees *logical* tensors: a ``Tensor`` whose payload is a
``BatchedArray`` (the physical tensor, the position of its batch dimension, the level) and
whose ``shape`` is one example's. An op with such an input reaches ``BatchLevel.apply``, which
runs the op's rule (``OpDef.batch``) with the levels below as the current interpreter (the
eager one, the tracer, an outer level: nested vmaps and ``@dualflow.compile`` see one batched
op), or, for an op without a rule, a loop over the batch for that op only, with a one-line
warning naming it. Logical tensors keep their own tape (``record``) when one of the op's
inputs requires grad at this level, so a ``grad`` inside ``vmap`` differentiates per example
and its backward's ops are batched too.
"""

from __future__ import annotations

import warnings
from typing import Any

from dualflow import ops
from dualflow._config import config
from dualflow.autograd.eager import check_inputs
from dualflow.errors import DualflowError
from dualflow.ops.dispatch import apply as dispatch_apply
from dualflow.ops.dispatch import current_interpreter
from dualflow.ops.registry import OpDef
from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import record

RANDOM_OPS = ("random_normal", "random_uniform", "dropout_mask")
_WARNED: set[str] = set()


class _Flags:
    # a logical tensor's layout is its rules' business: never copy it, never transpose it
    c_contiguous, f_contiguous = True, False


class BatchedArray:
    """The payload of a logical tensor: the physical Tensor ``value`` whose dimension ``bdim``
    is the batch of ``level``; ``shape`` drops that dimension."""

    __slots__ = ("bdim", "dtype", "level", "ndim", "shape", "size", "value")
    base = None
    flags = _Flags()

    def __init__(self, value: Tensor, bdim: int, level: BatchLevel) -> None:
        self.value, self.bdim, self.level = value, bdim, level
        physical = value.shape
        self.shape = physical[:bdim] + physical[bdim + 1 :]
        self.dtype, self.ndim = value.dtype, len(self.shape)
        size = 1
        for n in self.shape:
            size *= n
        self.size = size

    @property
    def device(self) -> Any:
        """The physical tensor's Device (``Tensor.device`` of a logical tensor)."""
        return self.value.device

    def _refuse(self, what: str) -> RuntimeError:
        return RuntimeError(
            f"vmap: {what} of a batched tensor (shape {self.shape} per example) is not "
            "supported inside vmap: its value differs per example; compute with ops instead"
            if self.level.live
            else f"vmap: a batched tensor escaped its vmap call ({what}); return it instead"
        )

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse("reading the data")

    def item(self) -> Any:
        raise self._refuse(".item() (bool(), float(), a Python if on a tensor)")

    def tolist(self) -> Any:
        raise self._refuse(".tolist()")

    def nonzero(self) -> Any:
        raise self._refuse("a boolean mask (its count decides the shape)")

    def __repr__(self) -> str:
        return f"BatchedArray(shape={self.shape}, bdim={self.bdim}, dtype={self.dtype})"

    def describe(self) -> str:
        """A logical tensor's text (``print`` inside vmap), as torch.func prints it: its level,
        batch dimension and physical value."""
        value = repr(self.value).replace("\n", "\n    ")
        return f"BatchedTensor(lvl={self.level.depth}, bdim={self.bdim}, value=\n    {value}\n)"


def loop_fallback(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """No rule: run ``op`` once per example on the slices and stack each output at 0 (a
    one-line warning naming the op, once per op per process).

    Example:
        >>> import warnings, dualflow
        >>> from dualflow.ops import OPS
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     out, dim = loop_fallback(OPS["exp"], (dualflow.zeros(2, 3),), (1,), {}, 3)
        >>> out.shape, dim
        ((3, 2), 0)
    """
    if op.name not in _WARNED:
        _WARNED.add(op.name)
        warnings.warn(
            f"vmap: op {op.name} has no batching rule; it runs once per example (a loop)",
            stacklevel=4,
        )
    return per_example(op, args, dims, attrs, size)


def per_example(op: OpDef, args: tuple, dims: tuple, attrs: dict, size: int) -> tuple:
    """``op`` once per example on the slices, each output stacked at 0 (a rule's own loop for
    the cases it has no batched form of: no warning).

    Example:
        >>> import dualflow
        >>> from dualflow.ops import OPS
        >>> out, dim = per_example(OPS["exp"], (dualflow.zeros(2, 3),), (1,), {}, 3)
        >>> out.shape, dim
        ((3, 2), 0)
    """
    results = []
    for b in range(size):
        picked = [a if d is None else _select(a, d, b) for a, d in zip(args, dims)]
        result = dispatch_apply(op, *picked, **attrs)
        results.append(result if isinstance(result, tuple) else (result,))
    stacked = tuple(ops.stack([r[i] for r in results], 0) for i in range(len(results[0])))
    if len(stacked) == 1 and op.nout == 1:
        return stacked[0], 0
    return stacked, (0,) * len(stacked)


def _select(x: Tensor, d: int, b: int) -> Tensor:
    return ops.getitem(x, (slice(None),) * d + (b,))


def physical_root(value: Tensor) -> Tensor:
    """The tensor under every vmap level's payload (a logical tensor's innermost physical).

    Example:
        >>> import dualflow
        >>> x = dualflow.zeros(4, 3)
        >>> logical = BatchLevel(4, "error").wrap(x, 0)
        >>> logical.shape, physical_root(logical) is x
        ((3,), True)
    """
    while type(value.raw_array) is BatchedArray:
        value = value.raw_array.value
    return value


class _Hooks:
    """The trace's hooks seen from inside vmap: a logical tensor's graph value is its physical
    tensor's (a ``detach()`` inside vmap must not capture the logical one as state)."""

    def __init__(self, below: Any) -> None:
        self.below = below

    def value_of(self, tensor: Tensor) -> Any:
        return self.below.value_of(physical_root(tensor))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.below, name)


class BatchLevel:
    """One vmap call: batch size ``size``; its tensors' payloads are ``BatchedArray``s."""

    def __init__(self, size: int, randomness: str) -> None:
        self.size, self.randomness = size, randomness
        self.below = current_interpreter.get()  # None: the default (eager) interpreter
        hooks = None if self.below is None else self.below.hooks
        self.hooks = None if hooks is None else _Hooks(hooks)
        self.live = True
        below, self.depth = self.below, 1  # its place among the vmaps around it (1: outermost)
        while below is not None:
            self.depth += isinstance(below, BatchLevel)
            below = getattr(below, "below", None)

    def wrap(self, physical: Tensor, bdim: int) -> Tensor:
        """The logical tensor of ``physical`` batched along ``bdim`` at this level; it requires
        grad when the physical one does (then its results do too, and ``vmap`` returns their
        physical tensors with the graph an enclosing grad follows; a result detached inside,
        e.g. by an inner transform, comes back detached)."""
        return Tensor.wrap(BatchedArray(physical, bdim, self), None, 0, physical.requires_grad)

    def before_read(self, array: Any, writable: bool) -> None:
        """Data is about to be read outside an op (``dispatch.reading``, lazy re-execution):
        the interpreter below runs what it has recorded first, as it would without this level."""
        below = getattr(self.below, "before_read", None)
        if below is not None and self.below.hooks is None:
            below(array, writable)

    def unwrap(self, value: Any) -> tuple[Any, int | None]:
        """``(physical, bdim)`` of an argument: bdim None when it is not batched here."""
        if isinstance(value, Tensor):
            payload = value.raw_array
            if type(payload) is BatchedArray and payload.level is self:
                return payload.value, payload.bdim
        return value, None

    def apply(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        """Run ``op`` through its batching rule when an input is batched here."""
        physical, dims = [], []
        for a in args:
            p, d = self.unwrap(a)
            physical.append(p)
            dims.append(d)
        if all(d is None for d in dims):
            if self.randomness == "different" and op.name in RANDOM_OPS:
                return self._random(op, args, attrs)
            return self._below(op, args, attrs)
        rule = op.batch or loop_fallback
        token = current_interpreter.set(self.below)  # the rule's ops go to the levels below
        try:
            result, out_dims = rule(op, tuple(physical), tuple(dims), attrs, self.size)
        except DualflowError as exc:  # name the shapes of one example, as the user wrote them
            check_inputs(op, list(args), attrs)
            raise exc from None
        finally:
            current_interpreter.reset(token)
        return self._logical(op, args, attrs, result, out_dims)

    def _below(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        token = current_interpreter.set(self.below)
        try:
            return dispatch_apply(op, *args, **attrs)
        finally:
            current_interpreter.reset(token)

    def _random(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Tensor:
        """randomness='different': one draw for the whole batch, examples along dim 0."""
        shape = (self.size, *attrs["shape"])
        return self.wrap(self._below(op, args, {**attrs, "shape": shape}), 0)

    def _logical(self, op: OpDef, args: tuple, attrs: dict, result: Any, out_dims: Any) -> Any:
        """Wrap the rule's physical outputs, recording a tape node for this level when an
        input requires grad here (a grad inside vmap)."""
        many = isinstance(result, tuple)
        results = result if many else (result,)
        dims = out_dims if many else (out_dims,)
        outs = tuple(
            r if d is None else Tensor.wrap(BatchedArray(r, d, self), None, i, False)
            for i, (r, d) in enumerate(zip(results, dims))
        )
        if (
            op.differentiable
            and config.grad_enabled
            and any(isinstance(a, Tensor) and a.requires_grad for a in args)
        ):
            node = record(
                op,
                attrs,
                args,
                tuple(args[i] for i in op.save_inputs),
                tuple(outs[i].raw_array for i in op.save_outputs),
                tuple(getattr(a, "shape", ()) for a in args),
                tuple((o.shape, o.dtype) for o in outs) if many else None,
            )
            for o in outs:
                if o.dtype.kind in "fc" and o.creator is None:
                    o.creator, o.requires_grad = node, True
        return outs if many else outs[0]

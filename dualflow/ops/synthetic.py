"""The synthetic ops no user calls: ``guard`` (a speculation the tracer checks at run time) and
``fused`` (a region of elementwise ops as one expression, made by ``passes/fuse.py``).

They are registered like every op, so passes, the planner and the runtime ask their facts
(``guard``, ``region``, ``node_kernel``...) instead of matching their names. ``check_node`` is
their form check in ``graph_ir.verify`` (their attributes say more than ``infer`` can check).
"""

from __future__ import annotations

import keyword
from typing import Any

from dualflow.kernels.expr.expression import check_expr, compile_numpy
from dualflow.kernels.expr.scalar_table import FUNCTIONS
from dualflow.kernels.expr.typed_program import lower_expr, sum_dtypes
from dualflow.kernels.fused import fused_kernel
from dualflow.kernels.fused_cpu.fused_elementwise import cpu_scratch
from dualflow.ops.broadcasting import broadcast_shapes
from dualflow.ops.registry import OPS, Meta, NodeFormError, OpDef, register

GUARD_KINDS = ("bool", "int", "float", "item")
FUSED_REDUCTIONS = ("sum",)  # reductions a fused node may end in (``reduce``), over all axes
_CONVERT = {"bool": bool, "int": int, "float": float}


def _guard_forward(xp: Any, value: Any, *, expect: Any, kind: str) -> bool:
    converted = _CONVERT.get(kind, lambda v: v)(value.item() if hasattr(value, "item") else value)
    return converted == expect or (converted != converted and expect != expect)  # NaN is NaN


def _guard_infer(value: Meta, *, expect: Any, kind: str) -> tuple[()]:
    if kind not in GUARD_KINDS:
        raise ValueError(f"guard: kind must be one of {GUARD_KINDS}, got {kind!r}")
    return ()


def _guard_check(node: Any) -> None:
    if len(node.inputs) != 1 or node.outputs or node.attrs.get("kind") not in GUARD_KINDS:
        raise NodeFormError(
            f"a guard takes one value, has no outputs and a kind in {GUARD_KINDS}",
            "build guards with GraphBuilder.guard",
        )


GUARD = register(
    OpDef(
        "guard",
        "synthetic",
        _guard_forward,
        _guard_infer,
        impure=True,  # never removed, merged or moved
        guard=True,
        check_node=_guard_check,
        doc="Whether ``kind(value) == expect`` (``item``: the value itself; NaN equals NaN).",
    )
)


def _fused_forward(xp: Any, *arrays: Any, expr: tuple, args: tuple, **attrs: Any) -> Any:
    """The region's expression through ``xp`` functions; a ``reduce`` runs that op itself,
    exactly as the unfused graph did (the reference interpreter's semantics)."""
    value = compile_numpy(expr, args, ())(xp, *arrays)
    reduce = attrs.get("reduce")
    if reduce is not None:
        value = OPS[reduce].forward(xp, value, axis=None, keepdims=attrs["keepdims"])
    return xp.asarray(value)


def _fused_infer(*metas: Meta, expr: tuple, args: tuple, **attrs: Any) -> tuple[Meta]:
    shape = broadcast_shapes(*(m.shape for m in metas))
    element = lower_expr(expr, args, tuple(m.dtype for m in metas)).dtype
    if attrs.get("reduce") is None:
        return (Meta(shape, element),)
    return (Meta((1,) * len(shape) if attrs["keepdims"] else (), sum_dtypes(element)[1]),)


def _identifier(name: Any) -> bool:
    return (
        type(name) is str and name.isascii() and name.isidentifier() and not keyword.iskeyword(name)
    )


def _fused_check(node: Any) -> None:
    """A well-formed expression over one name per input; when reducing, a known reduction, a
    bool ``keepdims``, and the output the sum op would give for the broadcast of its inputs
    (numpy's sum dtype of the element dtype)."""
    args = node.attrs.get("args")
    try:
        if type(args) is not tuple or len(args) != len(node.inputs):
            raise ValueError(f"args {args!r} do not name the {len(node.inputs)} inputs")
        if not all(_identifier(a) for a in args):
            raise ValueError(f"args {args!r} are not identifiers")
        check_expr(node.attrs.get("expr"), args)
    except ValueError as exc:
        raise NodeFormError(f"fused node: {exc}", "build fused nodes with passes.fuse") from None
    reduce = node.attrs.get("reduce")
    if reduce is None:
        return
    if reduce not in FUSED_REDUCTIONS or not isinstance(node.attrs.get("keepdims"), bool):
        raise NodeFormError(
            f"a fused reduction needs reduce in {FUSED_REDUCTIONS} and a bool keepdims",
            "build fused reductions with passes.fuse",
        )
    shapes = [v.shape for v in node.value_inputs]
    ndim = len(broadcast_shapes(*shapes)) if shapes else 0
    element = lower_expr(node.attrs["expr"], node.attrs["args"], [v.dtype for v in node.inputs])
    shape = (1,) * ndim if node.attrs["keepdims"] else ()
    dtype = sum_dtypes(element.dtype)[1].name
    if len(node.outputs) != 1 or (node.outputs[0].shape, node.outputs[0].dtype) != (shape, dtype):
        raise NodeFormError(
            f"a fused {reduce} of {element.dtype.name} elements gives {dtype}{list(shape)}",
            "declare the output the reduction op's infer gives",
        )


def _fused_kernel(metas: tuple, attrs: dict[str, Any], checked: bool, xp: Any = None) -> Any:
    reduce, keepdims = attrs.get("reduce"), bool(attrs.get("keepdims"))
    return fused_kernel(attrs["expr"], attrs["args"], metas, reduce, keepdims, checked, xp)


def _fused_scratch(metas: tuple, attrs: dict[str, Any]) -> int:
    if attrs.get("reduce") is not None:  # fused sums: numba loops need none; the blocked
        return 0  # sum's chunks (transcendental sums) are not counted yet
    return cpu_scratch(attrs["expr"], attrs["args"], metas)


def _fused_inplace(attrs: dict[str, Any], count: int) -> tuple[int, ...]:
    # the blocked evaluator writes a where/astype/erf result in several passes, and a sum's
    # output is no element of its inputs: those never share a buffer with an input
    expr = attrs["expr"]
    if attrs.get("reduce") is not None or expr[0] != "call" or not FUNCTIONS[expr[1]].inplace:
        return ()
    return tuple(range(count))


FUSED = register(
    OpDef(
        "fused",
        "synthetic",
        _fused_forward,
        _fused_infer,
        aliasing="fresh",
        layout="elementwise",
        region=True,
        node_kernel=_fused_kernel,  # numba, blocked numpy or CUDA: chosen per array module
        inplace_rule=_fused_inplace,
        scratch=_fused_scratch,
        check_node=_fused_check,
        doc="A region of elementwise ops as one expression (``expr`` over ``args``).",
    )
)

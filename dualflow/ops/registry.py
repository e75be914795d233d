"""The op registry: one stateless ``OpDef`` per op, and the three ways to define one.

``elementwise`` builds an op from a scalar expression (forward and infer come from it),
``primitive`` from a class holding ``infer``/``forward``/``backward``; composites are plain
functions over ops and need no registration. ``OPS`` maps every op name to its definition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from dualflow.errors import DTypeError, ShapeError
from dualflow.kernels.backend import device_elementwise
from dualflow.kernels.expr import Expr, compile_numpy, parse_expr


class Meta(NamedTuple):
    """Shape and dtype of an op input or output; ``dtype`` is a Python type for weak scalars."""

    shape: tuple[int, ...]
    dtype: Any


class OpDef:
    """One op: its name, forward/backward/infer and the facts the compiler needs about it.

    ``saves`` names what backward reads: ``x0``, ``x1``... (inputs) and ``y``/``y0``...
    (outputs). ``save_inputs`` and ``save_outputs`` are those names as index tuples.
    """

    __slots__ = (
        "args",
        "attr_names",
        "backward",
        "check_eager",
        "collective",
        "commutative",
        "differentiable",
        "doc",
        "expr",
        "expr_text",
        "forward",
        "impure",
        "infer",
        "inplace",
        "kind",
        "name",
        "nout",
        "save_inputs",
        "save_outputs",
        "saves",
    )

    def __init__(self, name: str, kind: str, forward: Callable, infer: Callable, **facts: Any):
        self.name, self.kind, self.forward, self.infer = name, kind, forward, infer
        self.backward: Callable | None = facts.get("backward")
        self.saves: tuple[str, ...] = tuple(facts.get("saves", ()))
        self.save_inputs = tuple(int(s[1:]) for s in self.saves if s.startswith("x"))
        outs = [s for s in self.saves if s.startswith("y")]
        self.save_outputs = tuple(0 if s == "y" else int(s[1:]) for s in outs)
        self.nout: int = facts.get("nout", 1)
        self.expr: Expr | None = facts.get("expr")
        self.expr_text: str | None = facts.get("expr_text")
        self.args: tuple[str, ...] = tuple(facts.get("args", ()))
        self.attr_names: tuple[str, ...] = tuple(facts.get("attr_names", ()))
        self.impure: bool = facts.get("impure", False)
        # talks to other ranks: every rank must run it the same number of times, in order
        self.collective: bool = facts.get("collective", False)
        self.commutative: bool = facts.get("commutative", False)
        self.inplace: tuple[tuple[int, int], ...] = tuple(facts.get("inplace", ()))
        self.differentiable: bool = self.backward is not None
        # Elementwise ops let numpy find bad input (infer runs only on failure, when tracing and
        # in debug mode), keeping eager overhead near a bare numpy call; primitives check first.
        self.check_eager: bool = facts.get("check_eager", kind == "primitive")
        self.doc: str = facts.get("doc", "")

    def __repr__(self) -> str:
        return f"<op {self.name}>"


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    """Add an op to ``OPS``; names are unique.

    Example:
        >>> "add" in OPS
        True
    """
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is registered twice")
    OPS[op.name] = op
    return op


def broadcast_metas(op: str, metas: tuple[Meta, ...]) -> tuple[int, ...]:
    """The numpy broadcast of the input shapes, or a ShapeError naming the op and shapes.

    Example:
        >>> broadcast_metas("add", (Meta((2, 1), np.float32), Meta((3,), np.float32)))
        (2, 3)
    """
    try:
        return tuple(np.broadcast_shapes(*(m.shape for m in metas)))
    except ValueError:
        shapes = ", ".join(str(m.shape) for m in metas)
        raise ShapeError(
            f"{op}: shapes {shapes} do not broadcast; trailing dimensions must be equal or 1"
        ) from None


def _dummy(meta: Meta) -> Any:
    if isinstance(meta.dtype, type) and meta.dtype in (bool, int, float):
        return meta.dtype(1)
    return np.ones((), dtype=meta.dtype)


def elementwise(
    name: str,
    expr: str,
    *,
    args: tuple[str, ...] = ("x",),
    attrs: tuple[str, ...] = (),
    saves: tuple[str, ...] = (),
    commutative: bool = False,
    doc: str = "",
) -> Callable[[Callable | None], OpDef]:
    """Register an elementwise op from its scalar expression; decorates its backward.

    Example:
        >>> op = OPS["relu"]; op.expr_text
        'maximum(x, 0)'
    """
    tree = parse_expr(expr, args, attrs)
    plain = compile_numpy(tree, args, attrs)  # numpy, and device cases CUDA C cannot type
    # other array modules run their backend's elementwise kernels (cupy: one cached
    # ElementwiseKernel of the whole expression, not a ufunc per call)
    forward = compile_numpy(tree, args, attrs, device_elementwise(name, tree, args, plain))
    dtype_cache: dict[tuple, Any] = {}

    def infer(*metas: Meta, **attr_values: Any) -> tuple[Meta]:
        if len(metas) != len(args):
            raise ShapeError(f"{name}: expected {len(args)} inputs, got {len(metas)}")
        shape = broadcast_metas(name, metas)
        key = (tuple(m.dtype for m in metas), tuple(sorted(attr_values.items())))
        if key not in dtype_cache:
            dtype_cache[key] = _result_dtype(name, forward, metas, attr_values)
        return (Meta(shape, dtype_cache[key]),)

    def decorate(backward: Callable | None) -> OpDef:
        op = OpDef(
            name,
            "elementwise",
            forward,
            infer,
            backward=backward,
            saves=saves,
            expr=tree,
            expr_text=expr,
            args=args,
            attr_names=attrs,
            commutative=commutative,
            inplace=tuple((0, i) for i in range(len(args))),
            doc=doc or (backward.__doc__ or ""),
        )
        return register(op)

    return decorate


def _result_dtype(name: str, forward: Callable, metas: tuple[Meta, ...], attrs: dict) -> Any:
    dtypes = ", ".join(str(getattr(m.dtype, "__name__", m.dtype)) for m in metas)
    try:
        with np.errstate(all="ignore"):
            sample = forward(np, *(_dummy(m) for m in metas), **attrs)
    except (TypeError, ValueError) as exc:
        raise DTypeError(f"{name}: unsupported input dtypes ({dtypes}): {exc}") from None
    dtype = np.asarray(sample).dtype
    if dtype.kind == "O":
        raise DTypeError(f"{name}: unsupported input dtypes ({dtypes})")
    return dtype


def primitive(name: str, **facts: Any) -> Callable[[type], OpDef]:
    """Register a primitive op from a class body holding ``infer``, ``forward``, ``backward``.

    Example:
        >>> OPS["matmul"].kind
        'primitive'
    """

    def decorate(cls: type) -> OpDef:
        body = vars(cls)
        op = OpDef(
            name,
            "primitive",
            body["forward"],
            body["infer"],
            backward=body.get("backward"),
            doc=cls.__doc__ or "",
            **facts,
        )
        return register(op)

    return decorate


def public_function(op: OpDef, defaults: dict[str, Any] | None = None) -> Callable:
    """Build the public function ``ops.<name>(*inputs, **attrs)`` of an elementwise op.

    Its docstring states the expression and carries an example computed at 0.5 per input.

    Example:
        >>> from dualflow import ops
        >>> ops.add.__name__
        'add'
    """
    from dualflow.ops.dispatch import apply  # noqa: PLC0415 - dispatch imports this module

    defaults = defaults or {}
    params = list(op.args) + [f"{a}=_default_{a}" for a in op.attr_names]
    call = ", ".join(list(op.args) + [f"{a}={a}" for a in op.attr_names])
    source = f"def {op.name}({', '.join(params)}):\n    return apply(OP, {call})\n"
    namespace: dict[str, Any] = {"apply": apply, "OP": op}
    namespace.update({f"_default_{a}": defaults.get(a) for a in op.attr_names})
    exec(compile(source, f"<dualflow ops.{op.name}>", "exec"), namespace)
    function = namespace[op.name]
    function.__module__ = "dualflow.ops"
    function.__doc__ = _docstring(op, defaults)
    return function


def _docstring(op: OpDef, defaults: dict[str, Any]) -> str:
    sample = ", ".join("0.5" for _ in op.args)
    with np.errstate(all="ignore"):
        value = op.forward(np, *(np.float64(0.5) for _ in op.args), **defaults)
    shown = (
        repr(round(float(value), 4))
        if np.asarray(value).dtype.kind == "f"
        else repr(np.asarray(value).item())
    )
    summary = op.doc.strip().splitlines()[0] if op.doc.strip() else f"Elementwise {op.name}."
    return (
        f"{summary}\n\n    Computes ``{op.expr_text}`` elementwise with numpy broadcasting.\n\n"
        f"    Example:\n        >>> from dualflow import ops\n"
        f"        >>> round(ops.{op.name}({sample}).item(), 4)\n        {shown}\n"
        if np.asarray(value).dtype.kind == "f"
        else f"{summary}\n\n    Computes ``{op.expr_text}`` elementwise.\n\n"
        f"    Example:\n        >>> from dualflow import ops\n"
        f"        >>> ops.{op.name}({sample}).item()\n        {shown}\n"
    )

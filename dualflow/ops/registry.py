"""The op registry: one stateless ``OpDef`` per op, and the three ways to define one.

``elementwise`` builds an op from a scalar expression (forward and infer come from it),
``primitive`` from a class holding ``infer``/``forward``/``backward``; composites are plain
functions over ops and need no registration. ``OPS`` maps every op name to its definition.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from dualflow.errors import DTypeError, ShapeError
from dualflow.kernels.backend import device_elementwise
from dualflow.kernels.expr.expression import compile_numpy, parse_expr, whole_ufunc
from dualflow.kernels.expr.out_forwards import expression_out, expression_scratch, writes_out
from dualflow.kernels.fused_cpu import fused_elementwise as cpu
from dualflow.ops.broadcasting import broadcast_shapes


class Meta(NamedTuple):
    """Shape and dtype of an op input or output; ``dtype`` is a Python type for weak scalars."""

    shape: tuple[int, ...]
    dtype: Any


class OpDef:
    """One op: its name, forward/backward/infer and every fact the compiler needs about it.

    ``saves`` names what backward reads: ``x0``, ``x1``... (inputs) and ``y``/``y0``...
    (outputs). ``save_inputs`` and ``save_outputs`` are those names as index tuples. Passes,
    the memory planner and the runtime ask these facts, never the op's name (``FACTS`` says
    what each one means).
    """

    __slots__ = (
        "aliasing",
        "aliasing_rule",
        "args",
        "async_role",
        "attr_names",
        "autocast",
        "backward",
        "batch",
        "check_eager",
        "check_node",
        "collective",
        "commutative",
        "differentiable",
        "doc",
        "eager_ufunc",
        "expr",
        "expr_text",
        "flops",
        "forward",
        "guard",
        "impure",
        "infer",
        "inplace",
        "inplace_rule",
        "jvp",
        "kind",
        "layout",
        "name",
        "node_kernel",
        "nout",
        "out",
        "passthrough",
        "prints",
        "region",
        "save_inputs",
        "save_outputs",
        "saves",
        "scratch",
        "split",
        "state_write",
    )

    def __init__(self, name: str, kind: str, forward: Callable, infer: Callable, **facts: Any):
        unknown = set(facts) - set(FACTS)
        if unknown:
            raise TypeError(f"op {name!r}: unknown facts {sorted(unknown)}; known: {sorted(FACTS)}")
        self.name, self.kind, self.forward, self.infer = name, kind, forward, infer
        for fact, default in FACTS.items():
            value = facts.get(fact, default[0])
            setattr(self, fact, tuple(value) if isinstance(default[0], tuple) else value)
        self.save_inputs = tuple(int(s[1:]) for s in self.saves if s.startswith("x"))
        outs = [s for s in self.saves if s.startswith("y")]
        self.save_outputs = tuple(0 if s == "y" else int(s[1:]) for s in outs)
        self.differentiable: bool = self.backward is not None
        # Elementwise ops let numpy find bad input (infer runs only on failure, when tracing and
        # in debug mode), keeping eager overhead near a bare numpy call; primitives check first.
        # A state write always takes the checked path: bad input must leave state untouched, and
        # that path saves the target for an all-or-nothing call's undo (``autograd.eager``); the
        # fast path, taken by ops that do not check, would write without saving it first.
        self.check_eager: bool = facts.get("check_eager", kind == "primitive") or self.state_write
        # the numpy ufunc that is the whole forward on numpy operands (``elementwise`` sets it)
        self.eager_ufunc: Callable | None = None

    def out_forward(self, checked: bool = True) -> Callable | None:
        """``f(xp, *inputs, out, **attrs)`` writing the (single) result into ``out``, or None
        when the op allocates. ``checked``: it writes only when the operands are C-ordered
        (else it returns eager's own result), for outputs whose layout follows the operands'.

        Example:
            >>> OPS["matmul"].out_forward() is not None, OPS["sum"].out_forward()
            (True, None)
        """
        return None if self.out is None else self.out(checked)

    def inplace_for(self, attrs: dict[str, Any], count: int, output: int = 0) -> tuple[int, ...]:
        """The inputs (of ``count``) result ``output`` may be written over: a per-index kernel
        reads an element's operands before writing it; BLAS, multi-pass kernels and sums do not.

        Example:
            >>> OPS["add"].inplace_for({}, 2), OPS["matmul"].inplace_for({}, 2)
            ((0, 1), ())
            >>> OPS["adam_update"].inplace_for({}, 10, output=2)
            (3,)
        """
        if self.inplace_rule is not None:
            return tuple(self.inplace_rule(attrs, count)) if output == 0 else ()
        return tuple(j for i, j in self.inplace if i == output and j < count)

    def __repr__(self) -> str:
        return f"<op {self.name}>"


# Every fact an op definition may state: (default, meaning).
FACTS: dict[str, tuple[Any, str]] = {
    "backward": (None, "backward(ctx, *gys) written with ops; None: not differentiable"),
    "batch": (
        None,
        "vmap's batching rule: f(op, args, dims, attrs, size) -> (result, out_dims), the op on "
        "physical inputs whose batch dimension is dims[i] (None: unbatched); None: vmap runs "
        "it once per example (dualflow/func/batch_rules.py attaches the rules)",
    ),
    "jvp": (
        None,
        "forward mode's rule: f(op, args, attrs, outs, tangents) -> the outputs' tangents, "
        "written with ops; None: no tangent (dualflow/func/jvp_rules.py attaches the rules)",
    ),
    "saves": ((), "what backward reads: x0, x1... (inputs), y, y0... (outputs)"),
    "nout": (1, "number of outputs"),
    "expr": (None, "elementwise ops: the parsed scalar expression"),
    "expr_text": (None, "elementwise ops: the expression as written"),
    "args": ((), "elementwise ops: input names of the expression"),
    "attr_names": ((), "elementwise ops: attribute names of the expression"),
    "doc": ("", "one-line description"),
    "check_eager": (False, "eager mode runs infer before forward (primitives do)"),
    "impure": (False, "RNG, collectives, state writes, guards: never removed, merged, moved"),
    "collective": (False, "talks to other ranks: every rank runs it equally often, in order"),
    "commutative": (False, "swapping its two inputs gives the same bits (cse sorts them)"),
    "inplace": ((), "(output, input) pairs that may share a buffer when the input dies"),
    "inplace_rule": (None, "inplace pairs that depend on attrs: f(attrs, count) -> inputs"),
    "aliasing": ("unknown", "'fresh': new memory; 'view': a view of an input; 'unknown': both"),
    "aliasing_rule": (None, "aliasing per call: f(input shapes, attrs) -> one of aliasing's"),
    "layout": (
        "any",
        "result layout: 'C', 'operands' (C if all are), 'elementwise' (C if all are C or "
        "broadcasts of C), 'broadcast', 'first', 'permute', 'reshape' (C of C), 'any' "
        "(graph_ir/layout.py)",
    ),
    "out": (None, "f(checked) -> forward writing its result into out=; None: it allocates"),
    "passthrough": (False, "a result of its first input's type is that input (bits, strides)"),
    "state_write": (False, "writes its first input's array in place (assign)"),
    "async_role": (None, "'start', 'wait' or 'progress' of a split (non-blocking) collective"),
    "split": (None, "(start, wait, progress) op names the overlap pass splits it into"),
    "guard": (False, "checks a speculation: a failing one ends the run before any commit"),
    "prints": (False, "writes to stdout: a plan holds its text until every guard passed"),
    "region": (False, "stands for a region of ops of the graph before fusion (attrs 'locs')"),
    "node_kernel": (None, "kernel built per node: f(metas, attrs, checked, xp=None) -> kernel"),
    "flops": (None, "floating-point operations of one call: f(metas, attrs) -> int (profiles)"),
    "scratch": (
        None,
        "bytes of temporaries its CPU kernel allocates and frees within one step (im2col "
        "columns, evaluator chunks): f(metas, attrs) -> int; the memory plan counts them",
    ),
    "check_node": (None, "checks a node's form where infer cannot (synthetic ops): f(node)"),
    "autocast": (
        None,
        "PyTorch's autocast list it is on: 'lower' (inputs in the low type), 'float32' (low "
        "inputs back in float32), 'float32_cuda' (float32 on CUDA only); None: inputs' types",
    ),
}


class NodeFormError(ValueError):
    """A synthetic op's node is malformed: ``str()`` says what, ``fix`` how to build it."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


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
        return broadcast_shapes(*(m.shape for m in metas))
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
    autocast: str | None = None,
) -> Callable[[Callable | None], OpDef]:
    """Register an elementwise op from its scalar expression; decorates its backward.

    Example:
        >>> op = OPS["relu"]; op.expr_text
        'maximum(x, 0)'
    """
    tree = parse_expr(expr, args, attrs)
    if tree[0] != "call":
        raise ValueError(f"{name}: an elementwise expression calls a function, got {expr!r}")
    ufunc = writes_out(tree)  # its last call takes out=: the planner may give it a buffer
    big = _big_numpy_calls(tree, args, attrs)
    plain = compile_numpy(tree, args, attrs)  # numpy, and device cases CUDA C cannot type
    # other array modules: their backend's elementwise kernels (cupy: one ElementwiseKernel)
    forward = compile_numpy(tree, args, attrs, device_elementwise(name, tree, args, plain), big)
    infer = _elementwise_infer(name, args, forward)

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
            aliasing="fresh",  # numpy allocates every ufunc, where and astype result
            layout="elementwise",  # in its operands' memory order (order='K')
            out=functools.partial(expression_out, name, tree, args, attrs) if ufunc else None,
            scratch=functools.partial(expression_scratch, tree, args),
            autocast=autocast,
        )
        op.eager_ufunc = None if attrs or big is not None else whole_ufunc(tree, args)
        return register(op)

    return decorate


def _big_numpy_calls(
    tree: tuple, args: tuple[str, ...], attrs: tuple[str, ...]
) -> tuple[int, Callable] | None:
    """``compile_numpy``'s ``big``: big numpy calls of a selection/comparison op (relu,
    relu_grad, where...) run ``cpu.eager_kernel``, one pass on both cores (bit-equal)."""
    if not cpu.quiet(tree) or attrs:
        return None
    return cpu.eager_min(tree), cpu.eager_kernel(tree, args)


def _elementwise_infer(name: str, args: tuple[str, ...], forward: Callable) -> Callable:
    """``infer`` of an elementwise op: numpy's broadcast of the shapes, and the dtype its
    forward gives on one-element samples (cached per input dtypes and attributes)."""
    dtype_cache: dict[tuple, Any] = {}

    def infer(*metas: Meta, **attr_values: Any) -> tuple[Meta]:
        if len(metas) != len(args):
            raise ShapeError(f"{name}: expected {len(args)} inputs, got {len(metas)}")
        shape = broadcast_metas(name, metas)
        key = (tuple(m.dtype for m in metas), tuple(sorted(attr_values.items())))
        if key not in dtype_cache:
            dtype_cache[key] = _result_dtype(name, forward, metas, attr_values)
        return (Meta(shape, dtype_cache[key]),)

    return infer


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

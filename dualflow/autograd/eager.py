"""The eager interpreter: run an op's forward now and, when grad is on, record a tape node.

This is the hot path of define-by-run code, so it does only what is needed: unwrap inputs, run
forward, wrap outputs, and record edges plus the op's declared ``saves``. Input checks (``infer``)
run first for primitives; elementwise ops let numpy detect bad input and explain it afterwards.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from dualflow._config import config
from dualflow._pending import Pending
from dualflow._undo import current as undo_log
from dualflow.device import device_of, get_array_module
from dualflow.errors import (
    DeviceError,
    DTypeError,
    DualflowError,
    NumericalError,
    ShapeError,
    format_location,
    user_frame,
    with_location,
)
from dualflow.ops.registry import Meta, OpDef
from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import record as record_node

_SCALARS = (int, float, bool)
_ndarray = np.ndarray
_new = object.__new__
_BOTH = (0, 1)


def meta_of(value: Any) -> Meta:
    """The Meta of an op argument; Python scalars are weak (their dtype is their type).

    Example:
        >>> meta_of(2.0)
        Meta(shape=(), dtype=<class 'float'>)
    """
    if isinstance(value, Tensor):
        value = value.raw_array
    if type(value) in _SCALARS:
        return Meta((), type(value))
    return Meta(tuple(value.shape), value.dtype)


def check_inputs(op: OpDef, arrays: list, attrs: dict[str, Any]) -> tuple[Meta, ...]:
    """Run ``op.infer`` on the inputs; typed errors get the user's source line appended."""
    try:
        return op.infer(*(meta_of(a) for a in arrays), **attrs)
    except DualflowError as exc:
        raise type(exc)(with_location(str(exc), user_frame())) from None
    except TypeError as exc:  # e.g. an unknown attribute name
        raise TypeError(with_location(f"{op.name}: {exc}", user_frame())) from None


def explain_failure(op: OpDef, arrays: list, attrs: dict[str, Any], exc: Exception) -> Exception:
    """Turn a raw numpy/cupy exception from forward into a typed error naming op and inputs."""
    devices = {str(device_of(a)) for a in arrays if type(a) not in _SCALARS}
    if len(devices) > 1:
        return DeviceError(
            with_location(
                f"{op.name}: inputs on different devices {sorted(devices)}; "
                "move them with .to_device() first",
                user_frame(),
            )
        )
    check_inputs(op, arrays, attrs)  # raises the op's own typed error when infer sees it
    metas = ", ".join(
        f"{m.shape}:{getattr(m.dtype, '__name__', m.dtype)}" for m in map(meta_of, arrays)
    )
    kind = DTypeError if isinstance(exc, TypeError) else ShapeError
    return kind(with_location(f"{op.name}: {exc} (inputs {metas}, attrs {attrs})", user_frame()))


class EagerInterpreter:
    """Runs ops immediately on arrays; the default interpreter."""

    hooks = None  # not a tracing interpreter (dispatch.tracing())

    def apply(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        # The common call (one or two numpy/scalar operands, one output, no input checks) takes
        # a path without loops, star-calls or helper frames: ~0.5 us of a ~3 us op (issue 38).
        if len(args) == 2 and op.nout == 1 and not op.check_eager:
            a, b = args
            ra = a.raw_array if isinstance(a, Tensor) else a
            rb = b.raw_array if isinstance(b, Tensor) else b
            if (type(ra) is _ndarray or type(ra) in _SCALARS) and (
                type(rb) is _ndarray or type(rb) in _SCALARS
            ):
                return _binary(op, args, attrs, a, b, ra, rb)
        elif len(args) == 1 and op.nout == 1 and not op.check_eager:
            a = args[0]
            ra = a.raw_array if isinstance(a, Tensor) else a
            if type(ra) is _ndarray:
                return _unary(op, args, attrs, a, ra)
        return self.apply_general(op, args, attrs)

    def apply_general(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        """Any call (other array modules, ``Pending``s, lists, several outputs, checked inputs):
        one pass over the inputs collects arrays, the array module and whether to record."""
        arrays = []
        requires = False
        xp: ModuleType = np
        for a in args:
            if isinstance(a, Tensor):
                arr = a.raw_array
                if a.requires_grad:
                    requires = True
            else:
                arr = a if type(a) in _SCALARS or hasattr(a, "shape") else np.asarray(a)
            if type(arr) is not _ndarray:
                if type(arr) is Pending:  # a lazily recorded result used eagerly: compute it
                    arr = arr.resolve()
                elif xp is np and type(arr) not in _SCALARS:
                    xp = get_array_module(arr)
            arrays.append(arr)
        debug = config.debug
        _before_forward(op, arrays, attrs, debug)
        try:
            out = op.forward(xp, *arrays, **attrs)
        except DualflowError:
            raise
        except Exception as exc:  # re-raised as a typed error that names the op and line
            raise explain_failure(op, arrays, attrs, exc) from exc
        record = requires and op.differentiable and config.grad_enabled
        if op.nout != 1:
            return _wrap_many(op, args, arrays, attrs, out, record, debug)
        if type(out) is not _ndarray:
            out = xp.asarray(out)
        if record and out.dtype.kind not in "fc" and out.dtype.char != "E":  # E: bfloat16
            record = False  # an integer or bool result (a cast) has no gradient, as in PyTorch
        if debug:
            check_finite(op, (out,), "output")
        result = Tensor.wrap(out, None, 0, record)
        if record:
            result.creator = record_node(
                op,
                attrs,
                args,
                tuple([args[i] for i in op.save_inputs]) if op.save_inputs else (),
                (out,) if op.save_outputs else (),
                tuple([getattr(a, "shape", ()) for a in arrays]),
                None,
                user_frame() if debug else None,
            )
        return result


def _before_forward(op: OpDef, arrays: list, attrs: dict, debug: bool) -> None:
    """The input checks (primitives, or any op in debug mode), and the state write's target
    saved first while an all-or-nothing call's undo log is current (``dualflow._undo``)."""
    if op.check_eager or debug:
        check_inputs(op, arrays, attrs)
    if op.state_write and (log := undo_log()) is not None:
        log.array(arrays[0])


def _binary(op: OpDef, args: tuple, attrs: dict, a: Any, b: Any, ra: Any, rb: Any) -> Tensor:
    """``EagerInterpreter.apply`` of a single-output op on two numpy arrays or Python scalars
    (``ra``, ``rb``: the payloads of ``a``, ``b``; ``a is ra`` when ``a`` is no Tensor)."""
    if config.debug:  # its checks and locations live in the general path
        return EAGER.apply_general(op, args, attrs)
    try:
        ufunc = op.eager_ufunc  # add, multiply...: the ufunc is the whole forward
        if ufunc is not None:
            out = ufunc(ra, rb)
        else:
            out = op.forward(np, ra, rb, **attrs) if attrs else op.forward(np, ra, rb)
    except DualflowError:
        raise
    except Exception as exc:  # re-raised as a typed error that names the op and line
        raise explain_failure(op, [ra, rb], attrs, exc) from exc
    if type(out) is not _ndarray:
        out = np.asarray(out)
    # a is ra: no Tensor (a scalar or an array argument), which never requires grad
    requires = (a is not ra and a.requires_grad) or (b is not rb and b.requires_grad)
    # an integer or bool result (a cast, a comparison) has no gradient, as in PyTorch (E: bfloat16)
    record = requires and op.differentiable and config.grad_enabled
    if record and out.dtype.kind not in "fc" and out.dtype.char != "E":
        record = False
    result = _new(Tensor)  # Tensor.wrap without its frame
    result.raw_array, result.requires_grad, result.output_index = out, record, 0
    result.creator = result.raw_grad = result.value = result.name = None
    if record:
        saves = op.save_inputs
        result.creator = record_node(
            op,
            attrs,
            args,
            () if not saves else args if saves == _BOTH else tuple([args[i] for i in saves]),
            (out,) if op.save_outputs else (),
            (ra.shape if type(ra) is _ndarray else (), rb.shape if type(rb) is _ndarray else ()),
        )
    return result


def _unary(op: OpDef, args: tuple, attrs: dict, a: Any, ra: Any) -> Tensor:
    """``EagerInterpreter.apply`` of a single-output op on one numpy array (``ra``, the payload
    of ``a``; ``a is ra`` when ``a`` is no Tensor)."""
    if config.debug:  # its checks and locations live in the general path
        return EAGER.apply_general(op, args, attrs)
    try:
        ufunc = op.eager_ufunc  # log, sqrt...: the ufunc is the whole forward
        if ufunc is not None:
            out = ufunc(ra)
        else:
            out = op.forward(np, ra, **attrs) if attrs else op.forward(np, ra)
    except DualflowError:
        raise
    except Exception as exc:  # re-raised as a typed error that names the op and line
        raise explain_failure(op, [ra], attrs, exc) from exc
    if type(out) is not _ndarray:
        out = np.asarray(out)
    record = a is not ra and a.requires_grad and op.differentiable and config.grad_enabled
    if record and out.dtype.kind not in "fc" and out.dtype.char != "E":  # as in _binary
        record = False
    result = _new(Tensor)  # Tensor.wrap without its frame
    result.raw_array, result.requires_grad, result.output_index = out, record, 0
    result.creator = result.raw_grad = result.value = result.name = None
    if record:
        result.creator = record_node(
            op,
            attrs,
            args,
            args if op.save_inputs else (),
            (out,) if op.save_outputs else (),
            (ra.shape,),
        )
    return result


def _wrap_many(
    op: OpDef, args: tuple, arrays: list, attrs: dict, out: Any, record: bool, debug: bool
) -> tuple:
    """Wrap the outputs of a multi-output op (and record its tape node when ``record``)."""
    xp = get_array_module(*out)
    outs = tuple(o if type(o) is _ndarray else xp.asarray(o) for o in out)
    if debug:
        check_finite(op, outs, "output")
    return wrap_results(op, args, arrays, attrs, outs, record, user_frame() if debug else None)


def wrap_results(
    op: OpDef, args: tuple, arrays: list, attrs: dict, outs: tuple, record: bool, loc: Any = None
) -> tuple:
    """``outs`` (arrays, or lazy re-execution's ``Pending``s) as Tensors, with the tape node
    eager records when ``record``; integer outputs (max's indices) never require grad, as in
    PyTorch.

    Example:
        >>> from dualflow.ops import OPS
        >>> [t.requires_grad for t in wrap_results(OPS["add"], (), [], {}, (np.ones(1),), False)]
        [False]
    """
    results = tuple(
        Tensor.wrap(o, None, i, record and (o.dtype.kind in "fc" or o.dtype.char == "E"))
        for i, o in enumerate(outs)
    )
    if record:
        node = record_node(
            op,
            attrs,
            args,
            tuple(args[i] for i in op.save_inputs),
            tuple(outs[i] for i in op.save_outputs),
            tuple(getattr(a, "shape", ()) for a in arrays),
            tuple((o.shape, o.dtype) for o in outs) if len(outs) > 1 else None,
            loc,
        )
        for r in results:
            if r.requires_grad:
                r.creator = node
    return results


def check_finite(op: OpDef, arrays: tuple, what: str, loc: Any = None) -> None:
    """Debug mode: raise NumericalError if a float array holds NaN or Inf."""
    for array in arrays:
        if array is None or array.dtype.kind not in "fc":
            continue
        xp = get_array_module(array)
        if not bool(xp.isfinite(array).all()):
            kind = "NaN" if bool(xp.isnan(array).any()) else "Inf"
            where = format_location(loc or user_frame())
            raise NumericalError(f"{op.name}: {what} contains {kind}\n  created at {where}")


EAGER = EagerInterpreter()  # the default interpreter: dualflow/__init__ installs it into ops

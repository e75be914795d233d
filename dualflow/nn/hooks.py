"""Module hooks: forward pre-hooks, forward hooks and full backward (pre-)hooks, as PyTorch's.

Backward hooks wrap the module's tensor inputs and outputs in identity *tape nodes* whose backward
is the hook call (PyTorch's ``BackwardHookFunction``). They are tape-only, like the node that
connects a compiled call to autograd (``tracer/autodiff.py``): the wrapped tensors keep the same
array and, when traced, the same IR value, so forward graphs are unchanged; a backward run under
the tracer records the hook's ops like any other backward op.
"""

from __future__ import annotations

import contextlib
import itertools
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dualflow import ops
from dualflow._config import config
from dualflow.ops.dispatch import tracing
from dualflow.ops.registry import Meta, OpDef
from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import Node, record

if TYPE_CHECKING:
    from dualflow.nn.module import Module

HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks")
_ids = itertools.count()


class RemovableHandle:
    """What ``register_*_hook`` returns: ``remove()`` unregisters the hook (also on ``with`` exit).

    Example:
        >>> from dualflow.nn import Linear
        >>> layer = Linear(2, 1)
        >>> handle = layer.register_forward_hook(lambda m, args, out: out * 0)
        >>> handle.remove(); len(layer._forward_hooks)
        0
    """

    def __init__(self, module: Module, table: str) -> None:
        self.id = next(_ids)
        self._module = weakref.ref(module)
        self._table = table

    def remove(self) -> None:
        """Unregister the hook (a no-op when already removed)."""
        module = self._module()
        if module is None or self.id not in getattr(module, self._table):
            return
        _fail_closed("removing a module hook")
        del getattr(module, self._table)[self.id]
        module._bump()

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _fail_closed(what: str) -> None:
    hooks = tracing()
    if hooks is not None:  # raised under fallback="error", else the trace is given up
        hooks.fail_closed(
            f"{what} inside a compiled function: hooks change what the graph computes. "
            "Register and remove hooks outside the compiled function (it is then retraced)"
        )


def add(
    module: Module,
    table: str,
    hook: Callable,
    prepend: bool,
    with_kwargs: bool = False,
    always_call: bool = False,
) -> RemovableHandle:
    """Register ``hook`` in ``module.<table>``; the module's version changes (retrace)."""
    if not callable(hook):
        raise TypeError(f"a hook must be callable, got {type(hook).__name__}")
    _fail_closed("registering a module hook")
    handle = RemovableHandle(module, table)
    entries = getattr(module, table)
    entries[handle.id] = (hook, bool(with_kwargs), bool(always_call))
    if prepend:
        entries.move_to_end(handle.id, last=False)
    module._bump()
    return handle


class HookMethods:
    """Module's hook registration methods (PyTorch's signatures)."""

    def register_forward_pre_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """``hook(module, args)`` (or ``(module, args, kwargs)``) before ``forward``; it may
        return new args (or ``(args, kwargs)``). Returns a handle whose ``remove()`` drops it."""
        return add(self, "_forward_pre_hooks", hook, prepend, with_kwargs)

    def register_forward_hook(
        self,
        hook: Callable,
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
        always_call: bool = False,
    ) -> RemovableHandle:
        """``hook(module, args, output)`` (or ``(module, args, kwargs, output)``) after
        ``forward``; it may return a new output. Returns a removable handle."""
        return add(self, "_forward_hooks", hook, prepend, with_kwargs, always_call)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` once the gradients of the module's tensor
        inputs are computed; it may return replacement ``grad_input``. Returns a handle."""
        return add(self, "_backward_hooks", hook, prepend)

    def register_full_backward_pre_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """``hook(module, grad_output)`` when the output gradients arrive; it may return
        replacement ``grad_output``. Returns a removable handle."""
        return add(self, "_backward_pre_hooks", hook, prepend)


def any_hooks(module: Module) -> bool:
    """Whether a call of ``module`` must go through ``call_with_hooks``."""
    d = module.__dict__
    return bool(
        d["_forward_pre_hooks"]
        or d["_forward_hooks"]
        or d["_backward_hooks"]
        or d["_backward_pre_hooks"]
    )


def _run_pre_hooks(module: Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    for hook, with_kwargs, _ in list(module._forward_pre_hooks.values()):
        if with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        "forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                        f"but got {result!r}"
                    )
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    return args, kwargs


def _run_forward_hooks(module: Module, args: tuple, kwargs: dict, output: Any, only: bool) -> Any:
    for hook, with_kwargs, always_call in list(module._forward_hooks.values()):
        if only and not always_call:
            continue
        result = hook(module, args, kwargs, output) if with_kwargs else hook(module, args, output)
        if result is not None:
            output = result
    return output


def call_with_hooks(module: Module, args: tuple, kwargs: dict) -> Any:
    """``module(*args, **kwargs)`` with its hooks, in PyTorch's order."""
    args, kwargs = _run_pre_hooks(module, args, kwargs)
    call = None
    if module._backward_hooks or module._backward_pre_hooks:
        call = _BackwardCall(module)
        args = call.wrap_inputs(args)
    try:
        output = module.forward(*args, **kwargs)
    except Exception:
        with contextlib.suppress(Exception):  # the forward's error is the one to report
            _run_forward_hooks(module, args, kwargs, None, only=True)
        raise
    output = _run_forward_hooks(module, args, kwargs, output, only=False)
    return output if call is None else call.wrap_outputs(output)


def _identity_node(tensors: list[Tensor], backward: Callable, name: str) -> list[Tensor]:
    """New tensors sharing ``tensors``' arrays (and traced values) whose backward is a hook."""
    op = OpDef(name, "hook", None, None, backward=backward, nout=len(tensors))
    node = record(op, {}, tensors, out_metas=tuple(Meta(t.shape, t.dtype) for t in tensors))
    tracer = tracing()
    outs = []
    for k, t in enumerate(tensors):
        out = Tensor.wrap(t.raw_array, node, k, True)
        if tracer is not None:  # the same IR value: the forward graph does not change
            out.value = tracer.value_of(t)
        outs.append(out)
    return outs


def _pack(size: int, positions: list[int], values: Any) -> list:
    packed = [None] * size
    for i, v in zip(positions, values):
        packed[i] = v
    return packed


def _checked(result: Any, expected: int, what: str) -> tuple:
    if len(result) != expected:
        raise RuntimeError(
            f"backward {what} returned an invalid number of gradients, got {len(result)}, "
            f"but expected {expected}"
        )
    return tuple(result)


class _BackwardCall:
    """One module call's backward-hook state: links output gradients to input gradients."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.hooks = [h for h, _, _ in module._backward_hooks.values()]
        self.pre_hooks = [h for h, _, _ in module._backward_pre_hooks.values()]
        self.args: tuple = ()
        self.inputs: list[int] | None = None  # positions of inputs that require grad
        self.grad_outputs: list | None = None

    def wrap_inputs(self, args: tuple) -> tuple:
        self.args = args
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not (positions and config.grad_enabled):
            return args
        self.inputs = positions
        name = f"backward_hook:{type(self.module).__name__}"
        wrapped = _identity_node([args[i] for i in positions], self.input_backward, name)
        new = list(args)
        for i, t in zip(positions, wrapped):
            new[i] = t
        return tuple(new)

    def wrap_outputs(self, output: Any) -> Any:
        single = not isinstance(output, tuple)
        outs = (output,) if single else output
        positions = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not (positions and config.grad_enabled):
            return output
        name = f"backward_pre_hook:{type(self.module).__name__}"

        def backward(ctx: Node, *gys: Any) -> tuple:
            return self.output_backward(len(outs), positions, gys)

        wrapped = _identity_node([outs[i] for i in positions], backward, name)
        new = list(outs)
        for i, t in zip(positions, wrapped):
            new[i] = t
        return new[0] if single else tuple(new)

    def output_backward(self, n_outputs: int, positions: list[int], gys: tuple) -> tuple:
        grads = _pack(n_outputs, positions, gys)
        for hook in self.pre_hooks:
            result = hook(self.module, tuple(grads))
            if result is not None:
                grads = list(_checked(result, n_outputs, "pre hook"))
        self.grad_outputs = grads
        if self.inputs is None:  # no input requires grad: the hooks fire here (as PyTorch)
            empty = (None,) * len(self.args)
            for hook in self.hooks:
                result = hook(self.module, empty, tuple(grads))
                if result is not None and any(r is not None for r in result):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should "
                        "always return None or None for all gradients."
                    )
            self.grad_outputs = None
        return tuple(grads[i] for i in positions)

    def input_backward(self, ctx: Node, *gys: Any) -> tuple:
        if self.grad_outputs is None:  # reached the inputs without passing the outputs
            return gys
        grads = [
            ops.zeros_like(a) if isinstance(a, Tensor) else None for a in self.args
        ]  # PyTorch materializes zeros for tensor inputs without a gradient
        for i, gy in zip(self.inputs or (), gys):
            if gy is not None:
                grads[i] = gy
        for hook in self.hooks:
            result = hook(self.module, tuple(grads), tuple(self.grad_outputs))
            if result is not None:
                grads = list(_checked(result, len(self.args), "hook"))
        self.grad_outputs = None
        return tuple(grads[i] for i in self.inputs or ())

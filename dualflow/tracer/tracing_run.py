"""The tracing run: call the function for real under the tracer and the environment probe.

Arguments become graph inputs (numpy arrays are handed in as ``ArrayArgument``s), object
arguments and the function's own ``self`` become roots of the environment, and any error rolls
back every state write the run made, so bad input leaves state untouched.
"""

from __future__ import annotations

import types
from typing import Any

from dualflow.errors import TracingError
from dualflow.ops.dispatch import interpreting
from dualflow.tensor.core import Tensor
from dualflow.tensor.raw_fields import watching
from dualflow.tracer import interrupts
from dualflow.tracer.array_argument import wrap_arguments
from dualflow.tracer.env_probe import EnvProbe
from dualflow.tracer.interpreter import TracingInterpreter
from dualflow.tracer.signature import Flat, changed_argument


def trace_call(tracer: TracingInterpreter, fn: Any, args: tuple, kwargs: dict, flat: Flat) -> Any:
    """Run ``fn(*args, **kwargs)`` once, recording it into ``tracer``; returns its result."""
    for leaf, path in zip(flat.leaves, flat.paths):
        tracer.bind_input(leaf, path)
    _add_roots(tracer, fn, flat)
    arrays = {id(leaf): path for leaf, path in zip(flat.leaves, flat.paths)}
    arrays = {k: p for k, p in arrays.items() if not _is_tensor_id(flat, k)}
    restore = _nothing
    if arrays:
        sizes = {} if tracer.shapes is None else tracer.shapes.array_sizes(tracer.arrays, arrays)
        args, kwargs, restore = wrap_arguments(args, kwargs, arrays, tracer.fail_closed, sizes)
    try:
        with interpreting(tracer), EnvProbe(tracer.env, tracer.fail_closed, fn), watching():
            return fn(*args, **kwargs)
    except BaseException:
        held = interrupts.hold()  # a second Ctrl-C must not stop the undo half way
        try:
            tracer.rollback()  # bad input must leave state untouched
        finally:
            if held:
                interrupts.release()
        raise
    finally:
        restore()


def _nothing() -> None:
    return None


def _is_tensor_id(flat: Flat, key: int) -> bool:
    return any(id(leaf) == key and isinstance(leaf, Tensor) for leaf in flat.leaves)


def _add_roots(tracer: TracingInterpreter, fn: Any, flat: Flat) -> None:
    """Objects reads start from besides globals and closures: ``self`` and object arguments."""
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        tracer.env.add_root(owner, "self", (("self",),))
    elif not isinstance(fn, types.FunctionType):  # a Module or another callable object
        tracer.env.add_root(fn, "self", (("self",),))
    for obj, path in flat.objects:
        tracer.env.add_root(obj, path, (("arg", path),))
    tracer.env.add_defaults(getattr(fn, "forward", fn))


def check_arguments_kept(tracer: TracingInterpreter, flat: Flat, after: Any) -> None:
    """Fail closed when the call changed its arguments' containers (``d["k"] = v``, a
    defaultdict's missing key, ``items.append``): a plan run would not do it again. ``after``
    is a thunk flattening the arguments as they are now."""
    try:
        changed = changed_argument(flat, after())
    except TracingError as exc:  # it put a container pytree refuses into an argument
        changed = str(exc)
    if changed is not None:
        tracer.fail_closed(
            f"the compiled function changes its argument {changed} in place (an item added, "
            "removed or replaced); a plan cannot do that again at later calls. Return the "
            "new values instead"
        )

"""The tracing interpreter: run every op for real *and* append it to a graph (DESIGN §3).

Tensors created outside the function become captured state, read by reference; ``assign`` to
them becomes a graph update; ``.grad`` reads and writes, ``bool()``/``float()``/``.item()``
(guards) and Module reads are observed through hooks in Tensor and Module. Writes made while
tracing are undone by ``rollback()`` if the trace fails, so a failed call leaves state as it was.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from dualflow._config import config
from dualflow.autograd.eager import EAGER
from dualflow.errors import TracingError, with_location
from dualflow.graph_ir.builder import GraphBuilder
from dualflow.graph_ir.ir import Value
from dualflow.ops.registry import Meta, OpDef
from dualflow.tensor.core import Tensor
from dualflow.tensor.tape import next_seq
from dualflow.tracer.array_argument import ArrayArgument, unwrap
from dualflow.tracer.env_record import EnvRecorder
from dualflow.tracer.grad_slots import GradSlots
from dualflow.tracer.history import ArgumentHistory
from dualflow.tracer.module_reads import ModuleReads
from dualflow.tracer.op_lines import op_line as _loc
from dualflow.tracer.state import StateChecks, StateRef
from dualflow.tracer.symbolic_trace import SymbolicShapes, split

_LITERALS = (int, float, bool)


def _root(array: Any) -> Any:
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


def _weak(method: Any) -> Any:
    """``method`` without a strong reference to its object: the tracer's parts call back into
    it, and a strong reference would be a cycle (freed only by the garbage collector)."""
    ref = weakref.WeakMethod(method)
    return lambda *args: ref()(*args)


class TracingInterpreter(GradSlots):
    """One trace in progress, installed as the current interpreter with ``interpreting()``; its
    ``on_*`` hooks implement ``ops.tracing_hooks.TracingHooks`` (``dispatch.tracing()``)."""

    def __init__(self, name: str, parent: TracingInterpreter | None = None) -> None:
        self.parent = parent  # the forward trace, when this one traces its backward
        self.residuals: list[Value] = []  # forward values this backward graph reads
        self.builder = GraphBuilder(name, first_id=0 if parent is None else 10**6)
        self.values: set[Value] = set()
        self.arrays: dict[int, tuple[Value, Any]] = {}  # id(array) -> (value, array kept alive)
        self.checks = StateChecks()
        self.slots: dict[int, int] = {}  # id(captured tensor) -> index into builder.state
        self.grad_seen: dict[int, Tensor] = {}  # owners whose .grad slot this trace touched
        self.grad_written: dict[int, Tensor] = {}
        self.input_positions: dict[int, int] = {}  # id(argument tensor) -> flat position
        self.names: dict[int, str] = {}
        self.backups: dict[int, tuple[Tensor, Any]] = {}
        self.created: set[int] = set()
        self.input_updates: dict[int, Value] = {}  # argument position -> its new content
        # id(base array) -> (last value id when it was assigned, the value written)
        self.assigned_roots: dict[int, tuple[int, Value]] = {}
        self.grad_backups: dict[int, tuple[Tensor, Any]] = {}
        self.single_use = False
        self.born: list[Any] = []  # weak references to state born and written in this call
        self.files: set[str] = set()  # user source files that issued traced ops
        self.collective_at: str | None = None  # where the first all-reduce was traced
        self.env = EnvRecorder(_weak(self.on_module_read))  # what the run read/wrote of Python
        self.failure: str | None = None  # the first fail-closed event: the trace is unusable
        self.strict = False  # fallback="error": raise the TracingError at once
        self.restores: list[Any] = []  # undo Python-side state of versioned objects (rollback)
        self.module_reads = ModuleReads(
            self.checks, self.restores, self.names, self.builder, self.env.flag_reads
        )
        # tape nodes numbered below first_seq were made before the call (arguments' history)
        self.first_seq = 0 if parent is not None else next_seq()
        self.history = ArgumentHistory(weakref.proxy(self), self.first_seq)
        self.leaves: list[Any] = []  # the call's argument leaves, in flat order
        self.debug_seen = False  # debug mode was on for some op: the plan checks every step
        self.differentiating: Any = None  # the tape node whose backward the engine runs
        self.tape_locs: dict[int, tuple[Any, str]] = {}  # id(tape node) -> (node, its line)
        # dynamic dimensions (issue 39): the sizes as expressions; a backward trace shares them
        self.shapes: SymbolicShapes | None = None if parent is None else parent.shapes

    @property
    def hooks(self) -> TracingInterpreter:
        """What ``dispatch.tracing()`` returns while this trace is current: the tracer itself
        (a property, not an attribute: ``self.hooks = self`` was a cycle that kept every array
        of the tracing run alive until the garbage collector ran)."""
        return self

    # ----- values ----------------------------------------------------------------------------
    def bind(self, tensor: Tensor, value: Value) -> Value:
        tensor.value = value
        self.values.add(value)
        return value

    def bind_input(self, leaf: Any, path: str) -> None:
        """Make an argument (Tensor or array) a graph input."""
        array = leaf.raw_array if isinstance(leaf, Tensor) else leaf
        value = self.builder.input(array.shape, array.dtype, path)
        self.values.add(value)
        if self.shapes is not None:
            self.shapes.bind_input(value, len(self.leaves), self.parent is None)
        self.arrays[id(array)] = (value, array)
        if isinstance(leaf, Tensor):
            leaf.value = value
            self.input_positions[id(leaf)] = len(self.builder.inputs) - 1
            self.history.add_argument(leaf, len(self.builder.inputs) - 1)
        self.leaves.append(leaf)

    def bind_saved(self, array: Any, name: str) -> None:
        """A saved array of an argument's tape: one more graph input (``history.py``)."""
        value = self.builder.input(array.shape, array.dtype, name)
        self.values.add(value)
        self.arrays[id(array)] = (value, array)

    def forward_loc(self, node: Any) -> str | None:
        """The line of the forward op that made tape ``node`` (this trace's or its parent's)."""
        tracer: TracingInterpreter | None = self
        while tracer is not None:
            found = tracer.tape_locs.get(id(node))
            if found is not None and found[0] is node:
                return found[1]
            tracer = tracer.parent
        return None

    def on_backward_node(self, node: Any) -> None:
        """The engine runs tape ``node``'s backward next (None: the backward pass ended)."""
        self.differentiating = node  # the ops it records belong to the node's forward op
        if node is not None and node.seq < self.first_seq:  # tape made before the traced call
            self.history.enter(node, self.leaves)  # an argument's history (history.py)

    def value_of(self, tensor: Tensor) -> Value:
        """The Value a tensor has in this trace, capturing it as state if it is new."""
        value = tensor.value
        if value is not None and value in self.values:
            return value
        known = self.arrays.get(id(tensor.raw_array))
        if known is not None:
            return self.bind(tensor, known[0])
        if self.parent is not None:  # a backward trace reading a forward value: a residual
            from_forward = self.parent.arrays.get(id(tensor.raw_array))
            if from_forward is not None:
                return self.residual(tensor, from_forward[0])
        return self.capture(tensor, "tensor", tensor)

    def residual(self, tensor: Tensor, forward_value: Value) -> Value:
        """Make a forward value an input of this (backward) graph."""
        array = tensor.raw_array
        value = self.builder.input(array.shape, array.dtype, f"saved%{forward_value.id}")
        self.arrays[id(array)] = (value, array)
        if self.shapes is not None:
            self.shapes.alias(value, forward_value)
        self.residuals.append(forward_value)
        return self.bind(tensor, value)

    def capture(self, current: Tensor, kind: str, owner: Tensor) -> Value:
        name = self.names.get(id(owner)) or owner.name or f"state{len(self.checks.refs)}"
        array = current.raw_array
        value = self.builder.add_state(
            array.shape, array.dtype, name + (".grad" if kind == "grad" else "")
        )
        self.checks.refs.append(StateRef.of(kind, owner, current, name))
        # an assign to the captured tensor (for a .grad: to the grad tensor) updates this slot
        self.slots[id(owner if kind == "tensor" else current)] = len(self.builder.state) - 1
        return self.bind(current, value)

    def capture_array(self, array: Any) -> Value:
        """A numpy array of the Python environment (a global, an attribute): captured state
        read by reference at every call, never a constant (it may change in place)."""
        label = self.env.known[id(array)].label
        value = self.builder.add_state(array.shape, array.dtype, label)
        self.checks.refs.append(StateRef.of_array(array, label))
        self.arrays[id(array)] = (value, array)
        self.values.add(value)
        return value

    def operand(self, arg: Any) -> Value | int | float | bool:
        if isinstance(arg, Tensor):
            if self.assigned_roots and arg.raw_array.base is not None:
                self._check_view(arg)
            return self.value_of(arg)
        if type(arg) in _LITERALS:
            return arg
        arg = unwrap(arg)
        array = arg if hasattr(arg, "shape") and not isinstance(arg, np.generic) else None
        if array is not None and id(array) in self.arrays:
            return self.arrays[id(array)][0]
        if array is not None and id(array) in self.env.arrays:
            return self.capture_array(array)  # read from the environment: by reference
        array = np.asarray(arg) if array is None else array
        value = self.builder.const(array)  # data created inside the function: a constant
        self.values.add(value)
        self.arrays[id(array)] = (value, array)
        return value

    # ----- the interpreter ---------------------------------------------------------------------
    def apply(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        if op.state_write:
            return self.assign(op, args)
        symbolic = self.shapes is not None and self.shapes.touches(args, attrs, self.arrays)
        if symbolic:  # the kernels run at the traced sizes; the node's facts keep expressions
            (args, attrs), sizes = split(args, attrs), (args, attrs)
        inputs = [self.operand(a) for a in args]
        self.debug_seen = self.debug_seen or config.debug  # using_config(debug=True) inside
        if any(type(a) is ArrayArgument for a in args):
            args = tuple(unwrap(a) for a in args)
        result = EAGER.apply(op, args, attrs)
        outs = result if isinstance(result, tuple) else (result,)
        metas = [Meta(o.raw_array.shape, o.raw_array.dtype) for o in outs]
        loc = _loc(self)
        values = self.builder.node(op.name, inputs, attrs, loc, metas)
        if op.collective and self.collective_at is None:
            self.collective_at = loc
        creator = outs[0].creator if outs else None
        if symbolic:
            self.shapes.record(self.builder.nodes[-1], *sizes, creator)  # type: ignore[union-attr]
        if creator is not None and loc is not None:
            self.tape_locs[id(creator)] = (creator, loc)  # kept alive: ids stay unique
        for tensor, value in zip(outs, values):
            self.bind(tensor, value)
            # backward rebuilds saved outputs as new Tensors around the same array: find them
            # by array identity (arrays are kept alive here, so ids are not reused meanwhile)
            self.arrays[id(tensor.raw_array)] = (value, tensor.raw_array)
        return result

    def assign(self, op: OpDef, args: tuple) -> Any:
        target, source = args
        self.value_of(target)
        new = self.operand(source)
        slot = self.slots.get(id(target))
        position = self.input_positions.get(id(target))
        if slot is None and position is None and self._views_outside(target):
            self.fail_closed(
                "assign into a view of a captured or argument tensor inside a compiled function: "
                "the graph would update the view, not the tensor. Assign the whole tensor "
                "(e.g. ops.assign(w, new_w) with the slice changed), or do it outside"
            )
        if (slot is not None or position is not None) and id(target) not in self.backups:
            self.backups[id(target)] = (target, target.raw_array.copy())
        result = EAGER.apply(op, args, {})  # first: a misfit value is assign's error, located
        new = self._coerce(new, target)
        self.assigned_roots[id(_root(target.raw_array))] = (self.builder.last_id, new)
        if slot is not None:
            self.builder.update(self.builder.state[slot], new)
        elif position is not None:  # writing into an argument: committed like state
            self.input_updates[position] = new
        elif id(target) in self.created or self.made_here(target):
            # State born inside this call (optimizer buffers on the first step, made with
            # Tensor() or with ops such as zeros_like): the graph would bake its first value in,
            # so this trace is used once and the next call, which finds the state already
            # there, is traced again with it captured.
            self.single_use = True
            self.born.append(weakref.ref(target))
        self.arrays[id(target.raw_array)] = (new, target.raw_array)
        self.bind(target, new)
        return result

    def _views_outside(self, target: Tensor) -> bool:
        """Whether ``target``'s array is a view into an argument's or captured tensor's."""
        root = _root(target.raw_array)
        if root is target.raw_array:
            return False
        known = self.arrays.get(id(root))
        if known is not None and known[1] is root and known[0] in self.builder.inputs:
            return True
        return any(ref.kind == "tensor" and ref.read() is root for ref in self.checks.refs)

    def _check_view(self, tensor: Tensor) -> None:
        # numpy views see later in-place writes; a graph value does not: fail closed.
        mark, written = self.assigned_roots.get(id(_root(tensor.raw_array)), (None, None))
        value = tensor.value
        stale = value is not None and value in self.values and value is not written
        if mark is not None and stale and value.id <= mark:
            self.fail_closed(
                "a view taken before an assign to its base tensor is read after the assign "
                "inside a compiled function; take the view after the assign"
            )

    def _coerce(self, new: Any, target: Tensor) -> Value:
        # An update must have exactly the state's type: add the cast/broadcast assign implies.
        array = target.raw_array
        dtype = new.dtype if isinstance(new, Value) else None
        if dtype != array.dtype.name:
            (new,) = self.builder.node("cast", [new], {"dtype": array.dtype.name}, _loc(self))
        if new.shape != array.shape:
            (new,) = self.builder.node("broadcast_to", [new], {"shape": array.shape}, _loc(self))
        self.values.add(new)
        return new

    # ----- hooks called by Tensor and Module -----------------------------------------------------
    def on_new_tensor(self, tensor: Tensor) -> None:
        value = self.builder.const(tensor.raw_array, tensor.name)
        self.arrays[id(tensor.raw_array)] = (value, tensor.raw_array)
        self.created.add(id(tensor))
        self.bind(tensor, value)

    def unwrap(self, data: Any) -> Any:
        """The array behind a numpy-array argument (``dualflow.tensor(x)`` reads the input)."""
        return unwrap(data)

    def on_copy(self, source: Any, copy: Tensor) -> None:
        """``tensor(source)`` inside the function: traced data stays traced (a ``cast`` node)."""
        source = unwrap(source)
        if isinstance(source, Tensor):
            value = self.value_of(source)
        elif id(source) in self.arrays and self.arrays[id(source)][1] is source:
            value = self.arrays[id(source)][0]
        elif id(source) in self.env.arrays:
            value = self.capture_array(source)
        else:
            return  # Python data or an outside array: the constant on_new_tensor made stands
        dtype = copy.raw_array.dtype.name
        (new,) = self.builder.node("cast", [value], {"dtype": dtype}, _loc(self))
        if self.shapes is not None:
            self.shapes.alias(new, value)
        self.created.discard(id(copy))
        self.arrays[id(copy.raw_array)] = (new, copy.raw_array)
        self.bind(copy, new)

    def symbolic_shape(self, tensor: Tensor) -> tuple | None:
        """``tensor``'s shape with its dynamic sizes as expressions (None: it has none)."""
        return None if self.shapes is None else self.shapes.shapes.get(tensor.value)

    def on_raw_access(self, tensor: Tensor, what: str) -> None:
        self.fail_closed(
            f"{what} of a tensor inside a compiled function: its value differs at every call, "
            "so it cannot be baked into the graph. Compute with dualflow ops instead; for a "
            "Python decision use bool()/float()/.item() (each adds a guard); to look at values "
            "use dualflow.debug.print(...), which prints on every call; pass data that is "
            "really constant as a static (non-tensor) argument"
        )

    def on_concrete(self, tensor: Tensor, kind: str, value: Any) -> None:
        if self.collective_at is not None:
            self.fail_closed(
                f"{kind}() of a tensor after the all-reduce at {self.collective_at} inside a "
                "compiled function: it would become a guard checked after the all-reduce, and "
                "a rank whose guard failed would redo the all-reduce eagerly while the others "
                "do not (a deadlock). Decide before the all-reduce, or outside the compiled "
                "function"
            )
            return
        self.builder.guard(self.value_of(tensor), value, kind, _loc(self))

    def on_module_read(self, module: Any) -> None:
        """Record a versioned object (Module, Optimizer) the trace depends on."""
        self.module_reads.read(module)

    def on_train_mode(self, modules: list[Any], mode: bool) -> None:
        """``Module.train(mode)`` sets ``training`` on ``modules`` (replayed by plan runs)."""
        self.module_reads.set_mode(modules, mode)

    def on_module_write(self, module: Any, name: str, value: Any) -> None:
        self.fail_closed(
            f"assigning {type(module).__name__}.{name} inside a compiled function: a compiled "
            "graph cannot replay Python attribute writes. Update tensor state in place with "
            "dualflow.ops.assign(module.<tensor>, value), or change the module outside the "
            "compiled function (it will be retraced)"
        )

    # ----- ending --------------------------------------------------------------------------------
    def fail_closed(self, message: str, line: str | None = None) -> None:
        """Record that this trace cannot be used (the run itself goes on, correct, eagerly).

        The first event is kept, so a TracingError the user's code catches and swallows still
        invalidates the trace; with ``fallback="error"`` the TracingError is raised at once.
        """
        text = f"{message}\n  at {line}" if line is not None else with_location(message)
        if self.failure is None:
            self.failure = text
        if self.strict:
            raise TracingError(text)

    def made_here(self, tensor: Tensor) -> bool:
        """Whether ``tensor`` was computed or created by this traced call (not state/input)."""
        value = tensor.value
        if value is None or value not in self.values:
            return False
        return id(tensor) not in self.slots and id(tensor) not in self.input_positions

    def rollback(self) -> None:
        """Undo the in-place state writes made while tracing (the trace failed)."""
        for tensor, saved in self.backups.values():
            tensor.raw_array[...] = saved
        for owner, grad in self.grad_backups.values():
            owner.raw_grad = grad
        for restore in reversed(self.restores):  # optimizer state dicts, param groups
            restore()
        self.backups.clear()
        self.grad_backups.clear()
        self.restores.clear()

"""The lazy recorder: the interpreter of lazy re-execution, recording tensor ops, not computing.

While a compiled function runs lazily, every op call comes here: its inputs are checked with
``infer`` (so bad input raises the eager error at the user's line), its results are tensors
around ``Pending`` arrays, and the autograd tape is recorded exactly as eager records it, so the
engine's backward and the optimizers' updates are recorded the same way. Python itself runs for
real: environment reads, side effects and Python randomness are right by construction.

Writes (``assign``) to arrays that exist outside the recording are remembered, not done: later
reads see the written value in the graph, and the write is committed when the segment runs.
Anything the recorder cannot express without reading data — a collective, a printing op, an op
whose result shape depends on values, a write into memory another recorded result views — first
runs what is pending (``flush``) and then runs eagerly on the real arrays. So is every read of
data by code that is not an op (``Pending`` and ``dispatch.reading`` call ``flush``), and every
op reading integers: it may raise on them (``value_errors``), at its line as in eager.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from dualflow._config import config
from dualflow._pending import Pending, resolved
from dualflow.autograd.eager import EAGER, check_inputs, meta_of, wrap_results
from dualflow.errors import DualflowError, user_frame
from dualflow.graph_ir.layout import RULES, C
from dualflow.ops.registry import OPS, Meta, OpDef
from dualflow.ops.value_errors import reads_integers
from dualflow.tensor.core import Tensor
from dualflow.tracer import interrupts
from dualflow.tracer.lazy_keys import INFERRED, LITERALS, bits, described, frozen_attrs
from dualflow.tracer.lazy_plans import LazyPlans, Segment, root_of

_CAST, _BROADCAST = OPS["cast"], OPS["broadcast_to"]


class NotHost(Exception):
    """An operand lives on a GPU: lazy re-execution records host programs only."""


class LazyRecorder:
    """One lazily run call: records ops into segments and runs each segment when needed."""

    hooks = None  # Python runs for real: to Tensor, Module and the engine this is eager mode

    def __init__(self, plans: LazyPlans, log: Any) -> None:
        self.plans, self.log = plans, log
        self.segment = Segment()
        self.generation = 0  # bumped by every flush
        self.pendings: list[Any] = []  # weak references to this segment's results, in order
        self.overrides: dict[int, int] = {}  # id(outside array) -> result number written to it
        self.aliases: dict[int, int] = {}  # id(a view made now) -> its recorded result number
        self.ref_slots: dict[int, int] = {}  # id(array) -> ref slot
        self.written_roots: set[int] = set()  # memory with a write not committed yet
        self.viewers: dict[int, list] = {}  # memory -> weak refs to recorded views of it
        self.stand_ins: dict[int, tuple] = {}  # id(Pending) -> (written tensor, it, its array)
        self.flushing = False
        self.ending = False  # the call's last flush runs (not a graph break)
        self.unlogged_end = False  # nothing can fail after the last flush (no closing vote)
        self.closed = False

    # ----- the interpreter ----------------------------------------------------------------------
    def apply(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        if op.state_write:
            return self.assign(args[0], args[1])
        if op.collective or op.prints or config.debug or reads_integers(args):
            return self.now(op, args, attrs)  # may raise on values: at its line, as eager
        if op.aliasing != "fresh" and not any(self.mine(a) for a in args):
            return self.view_now(op, args, attrs)
        generation = self.generation
        # a numpy array handed to an op directly is copied: eager reads it now, not at the flush
        arrays = [a.raw_array if isinstance(a, Tensor) else _copied(a) for a in args]
        try:
            operands = [self.operand(a) for a in arrays]
        except NotHost:
            return self.now(op, args, attrs)
        if self.generation != generation:  # reading an operand needed a flush: numbers changed
            return self.apply(op, args, attrs)
        frozen = frozen_attrs(attrs)
        known = INFERRED.get((op, tuple(map(described, arrays)), frozen))
        if known is None:
            known = self.infer(op, arrays, attrs)
            if known is None:  # its result's shape depends on values: compute it
                return self.now(op, args, attrs)
        outs = self.results(op, operands, arrays, attrs, frozen, known)
        return self.wrap(op, args, arrays, attrs, outs)

    def now(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        """Run ``op`` eagerly on real arrays, after everything recorded before it."""
        self.flush()
        if op.state_write:
            self.log.array(getattr(args[0], "raw_array", args[0]))
        self.plans.eager_ops += 1
        return EAGER.apply(op, args, attrs)

    def mine(self, arg: Any) -> bool:
        """Whether ``arg`` is (a tensor of) a result this segment has not computed yet."""
        array = arg.raw_array if isinstance(arg, Tensor) else arg
        return type(array) is Pending and array.real is None and array.owner is self

    def view_now(self, op: OpDef, args: tuple, attrs: dict[str, Any]) -> Any:
        """An op that may view its (real) inputs, run now — a view reads no data, and the
        result has eager's very strides (backward formulas choose by them) — and recorded too,
        so a plan computes it from its input as a trace's plan would, never reading it as a
        strided array of its own (a copy must see pending writes: flush first)."""
        for a in args:
            array = a.raw_array if isinstance(a, Tensor) else a
            if hasattr(array, "shape") and id(root_of(resolved(array))) in self.written_roots:
                self.flush()
                break
        generation = self.generation
        try:
            operands = [self.operand(a.raw_array if isinstance(a, Tensor) else a) for a in args]
        except NotHost:
            return self.now(op, args, attrs)
        if self.generation != generation:
            return self.view_now(op, args, attrs)
        result = EAGER.apply(op, args, attrs)
        outs = result if isinstance(result, tuple) else (result,)
        metas = [Meta(t.shape, t.dtype) for t in outs]
        first = self.segment.record(op, tuple(operands), attrs, metas, frozen_attrs(attrs))
        for number, t in enumerate(outs, first):
            self.aliases[id(t.raw_array)] = number
            self.segment.keep.append(t.raw_array)  # held: its id stays unique until the flush
        return result

    def infer(self, op: OpDef, arrays: list, attrs: dict[str, Any]) -> tuple | None:
        """The results' metadata and layout; None when ``infer`` cannot say without data.
        Remembered by the inputs' metadata and the attributes (all ``infer`` sees)."""
        try:
            metas = op.infer(*(meta_of(a) for a in arrays), **attrs)
        except (DualflowError, TypeError):
            check_inputs(op, arrays, attrs)  # the same error, with the user's line
            raise
        except Exception:  # infer needs values: the op runs eagerly instead
            return None
        for meta in metas:
            if not all(type(n) is int for n in meta.shape):
                return None
        ins = [described(a) for a in arrays]
        layouts = [d[2] if type(d) is tuple else C for d in ins]
        small = all(math.prod(m.shape) <= 1 for m in metas)  # C whatever the strides
        known = (list(metas), C if small or RULES[op.layout](layouts) == C else "any")
        if len(INFERRED) > 4096:
            INFERRED.clear()
        INFERRED[(op, tuple(ins), frozen_attrs(attrs))] = known
        return known

    def results(
        self, op: OpDef, operands: list, arrays: list, attrs: dict, frozen: tuple, known: tuple
    ) -> list:
        """New Pending results of ``op``, numbered and recorded in the segment."""
        metas, layout = known
        first = self.segment.record(op, tuple(operands), attrs, metas, frozen)
        outs = []
        for number, meta in enumerate(metas, first):
            pending = Pending(meta.shape, meta.dtype, self, number)
            pending.layout = layout
            self.pendings.append(weakref.ref(pending))
            outs.append(pending)
        if op.aliasing != "fresh":  # it may view an input: eager's own kernel makes it later
            for i, pending in enumerate(outs):
                pending.source = (op, arrays, attrs, i if len(outs) > 1 else None)
            self.mark_views(arrays, outs)
        return outs

    def wrap(self, op: OpDef, args: tuple, arrays: list, attrs: dict, outs: list) -> Any:
        """The results as Tensors, with the tape node eager would record."""
        record = op.differentiable and config.grad_enabled
        record = record and any(isinstance(a, Tensor) and a.requires_grad for a in args)
        if record and len(outs) == 1 and outs[0].dtype.kind not in "fc":
            record = outs[0].dtype.char == "E"  # an integer or bool result has no gradient
        tensors = wrap_results(op, args, arrays, attrs, tuple(outs), record)
        return tensors if op.nout != 1 else tensors[0]

    # ----- operands -----------------------------------------------------------------------------
    def operand(self, array: Any) -> Any:
        """An input as the key and the graph see it: a result number, a ref (negative), or a
        Python literal as ``(type, value)``."""
        kind = type(array)
        if kind is Pending:
            if array.real is None and array.owner is self:
                return array.value
            array = array.resolve()
        elif kind in LITERALS:
            return (kind, array, bits(array))  # the bits in the key: -0.0 is not 0.0
        elif kind is not np.ndarray:
            if kind.__module__.startswith("cupy"):  # recording is host-only: run it eagerly
                raise NotHost
            array = np.array(array)  # numpy scalars, lists: a copy made now (eager reads now)
        written = self.overrides.get(id(array))
        if written is not None:
            return written
        if self.written_roots and id(root_of(array)) in self.written_roots:
            self.flush()  # a view of memory written in this segment: commit the write first
        alias = self.aliases.get(id(array))  # a view made now, recorded: the graph's value
        return alias if alias is not None else -1 - self.ref(array)

    def ref(self, array: Any) -> int:
        """The slot of an outside array read by reference when the segment runs."""
        slot = self.ref_slots.get(id(array))
        if slot is None:
            slot = self.ref_slots[id(array)] = len(self.segment.refs)
            self.segment.refs.append(array)  # held: its id stays unique until the flush
        return slot

    def memory_of(self, array: Any) -> int:
        """Which memory ``array`` is: a key shared by everything that views it."""
        if type(array) is Pending:
            if array.real is None and array.owner is self:
                return array.base_key
            array = array.real
        return id(root_of(array))

    def mark_views(self, arrays: list, outs: list) -> None:
        """``outs`` may view the memory of ``arrays``: a write into it must be seen by them."""
        for a in arrays:
            if type(a) in LITERALS or not hasattr(a, "shape"):
                continue
            key = self.memory_of(a)
            self.viewers.setdefault(key, []).extend(weakref.ref(o) for o in outs)
            for o in outs:
                o.base_key = key

    def viewed(self, key: int) -> bool:
        """Whether a recorded view of memory ``key`` is alive and not computed yet."""
        return any((v := ref()) is not None and v.real is None for ref in self.viewers.get(key, ()))

    # ----- writes -------------------------------------------------------------------------------
    def assign(self, target: Any, source: Any) -> Any:
        """``assign(target, source)``: a new value for the target, committed at the flush."""
        array = target.raw_array
        standing = self.stand_ins.get(id(array))
        if standing is not None and standing[1] is array:  # written before in this segment
            array = standing[2]
        mine = type(array) is Pending and array.real is None and array.owner is self
        if mine and (array.source is not None or self.viewed(array.base_key)):
            mine = False  # memory other results view: they must see the write, so do it now
            self.flush()
        if not mine:
            real = array.resolve() if type(array) is Pending else array
            host = type(real) is np.ndarray  # (a GPU target: written eagerly, like any GPU op)
            if not host or real.base is not None or self.viewed(id(root_of(real))):
                return self.now(OPS["assign"], (target, source), {})
        generation = self.generation
        try:
            value = self.operand(source.raw_array if isinstance(source, Tensor) else source)
        except NotHost:
            return self.now(OPS["assign"], (target, source), {})
        if self.generation != generation:
            return self.assign(target, source)
        check_inputs(OPS["assign"], [array, self._meta_array(value, source)], {})
        value = self.coerce(value, array.shape, np.dtype(array.dtype))
        if mine:
            array.value = value
        else:
            slot = self.ref(real)
            self.segment.updates[slot] = value
            self.overrides[id(real)] = value
            self.written_roots.add(id(root_of(real)))
            self.stand_in(target, real, value)
        return Tensor.wrap(target.raw_array, None, 0, False)

    def stand_in(self, target: Tensor, real: Any, value: int) -> None:
        """Until the flush commits the write, ``target`` holds a ``Pending`` standing for its
        written memory: any reader of its data (an op, ``.item()``, numpy, code that reads
        ``_array``) gets the written values, never the old ones; the flush gives it back."""
        standing = self.stand_ins.get(id(target.raw_array))
        if standing is not None and standing[1] is target.raw_array:
            standing[1].value = value  # written again: the newest value
            return
        pending = Pending(real.shape, real.dtype, self, value)
        pending.layout = C if real.flags.c_contiguous else "any"
        pending.base_key = id(root_of(real))  # views of it are views of that memory
        self.stand_ins[id(pending)] = (target, pending, real)
        target.raw_array = pending

    def _give_back(self) -> None:
        """Written tensors get their (now written) arrays back; their stand-ins resolve to it."""
        for target, pending, real in self.stand_ins.values():
            pending.settle(real)
            if target.raw_array is pending:
                target.raw_array = real
        self.stand_ins = {}

    def _meta_array(self, value: Any, source: Any) -> Any:
        """The written value's shape and dtype (or the literal), for assign's own checks."""
        if type(value) is tuple:
            return value[1]
        return self._meta_of(value)

    def coerce(self, value: Any, shape: tuple, dtype: np.dtype) -> int:
        """``value`` cast and broadcast to the target's dtype and shape, as assign does."""
        meta = self._meta_of(value)
        if meta is None or meta.dtype != dtype:
            value = self.internal(
                _CAST, value, {"dtype": dtype.name}, Meta(meta_shape(meta), dtype)
            )
            meta = self._meta_of(value)
        if tuple(meta.shape) != tuple(shape):
            value = self.internal(_BROADCAST, value, {"shape": tuple(shape)}, Meta(shape, dtype))
        return value

    def _meta_of(self, value: Any) -> Meta | None:
        if type(value) is tuple:
            return None
        if value >= 0:
            return self.segment.metas[value]
        ref = self.segment.refs[-1 - value]
        return Meta(ref.shape, ref.dtype)

    def internal(self, op: OpDef, value: Any, attrs: dict, meta: Meta) -> int:
        """A recorded op no Python object sees (assign's implied cast or broadcast)."""
        return self.segment.record(op, (value,), attrs, [meta], frozen_attrs(attrs))

    # ----- running what is pending --------------------------------------------------------------
    def before_read(self, array: Any, writable: bool) -> None:
        """``dispatch.reading``: data is about to be read (``writable``: and maybe written)."""
        if type(array) is Pending or self.closed:
            return
        root = id(root_of(array))
        pending_use = writable and (id(array) in self.ref_slots or self.viewed(root))
        if root in self.written_roots or pending_use:
            self.flush()

    def flush(self) -> None:
        """Run the segment recorded so far, fill its live results, commit its writes."""
        if self.flushing or self.closed:
            return
        segment, live, views = self.segment, [], []
        for ref in self.pendings:
            pending = ref()
            if pending is not None and pending.real is None:
                (live if pending.source is None else views).append(pending)
        if not segment.ops and not segment.updates and not views:
            return
        self.flushing = True
        try:
            self._note_break()
            arrays, updates = self.plans.run(segment, [p.value for p in live], config.snapshot())
            for pending, real in zip(live, arrays):
                pending.settle(real)
            self._commit(segment, updates)
            self._give_back()
            for pending in views:  # eager's kernel on the real inputs: shares what eager shares
                op, inputs, attrs, index = pending.source
                out = op.forward(np, *[resolved(i) for i in inputs], **attrs)
                pending.settle(np.asarray(out if index is None else out[index]))
                pending.source = None
        finally:
            self._give_back()  # also when the segment failed: the undo log restores contents
            self.flushing = False
            self._next_segment()

    def _commit(self, segment: Segment, updates: dict) -> None:
        """Write the segment's updates. A break's writes are saved first (the call may still
        fail); the last flush's need no copy when nothing can fail after it (``unlogged_end``):
        its writes, like a plan's commit, happen with interrupts held, all or none."""
        logged = not (self.ending and self.unlogged_end)
        held = interrupts.hold()
        try:
            for slot, new in updates.items():
                target = segment.refs[slot]
                if logged:
                    self.log.array(target)
                target[...] = new
        finally:
            if held:
                interrupts.release()

    def _next_segment(self) -> None:
        self.segment, self.pendings = Segment(), []
        self.overrides, self.ref_slots, self.aliases = {}, {}, {}
        self.written_roots, self.viewers = set(), {}
        self.generation += 1

    def _note_break(self) -> None:
        if not self.ending:
            frame = user_frame()
            line = "?" if frame is None else f"{frame[0]}:{frame[1]}"
            self.plans.breaks[line] = self.plans.breaks.get(line, 0) + 1

    def finish(self) -> None:
        """The call returned: run what is pending; later reads of its results need nothing."""
        self.ending = True
        self.flush()
        self.closed = True


def _copied(arg: Any) -> Any:
    return arg.copy() if type(arg) is np.ndarray else arg


def meta_shape(meta: Meta | None) -> tuple:
    return () if meta is None else tuple(meta.shape)

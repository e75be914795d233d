"""Python side effects of a trace: replayed after every plan run with that call's values.

The probe reports each place of the environment the tracing run changed. A change that only
adds (``losses.append(loss)``, ``history["loss"] = loss``, ``self.last = out``, ``global G``)
is replayed on every call, with the call's own tensors in place of the traced ones. A change
that depends on what the place held before (``counter.n += 1``, sorting, removing), that deletes,
or that stores an object the call built and a plan cannot rebuild, fails closed instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dualflow.errors import TracingError
from dualflow.tensor.core import Tensor
from dualflow.tracer import pytree
from dualflow.tracer.env_guards import ATTR, CELL, CONTENT, GLOBAL, ITEM, MISSING, is_value, same
from dualflow.tracer.env_record import Change, EnvRecorder, key_id

# How to rebuild a stored value: ("same", obj) (``module_reads``' training flags), or its pytree
# (objects kept as they are are its statics) and, per tensor leaf, ("output", k) |
# ("input", position) | ("same", tensor)
Template = tuple[Any, Any]


class NotReplayable(Exception):
    """A change a plan cannot replay; the message says which and where."""


@dataclass
class Replay:
    """What to do after each plan run: ``(kind, holder, key, template)`` in trace order."""

    actions: list[tuple[str, Any, Any, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.actions)

    def apply(self, outputs: list[Tensor], leaves: list[Any]) -> None:
        """Redo every side effect with this call's ``outputs`` and argument ``leaves``."""
        for kind, holder, key, template in self.actions:
            if kind == "extend":
                holder.extend(_build(t, outputs, leaves) for t in template)
            elif kind == "setitems":
                for k, t in template:
                    holder[k] = _build(t, outputs, leaves)
            elif kind == "setadd":
                holder.update(_build(t, outputs, leaves) for t in template)
            elif kind == "mode":  # train()/eval(): the flag, without a Module version bump
                object.__setattr__(holder, "training", _build(template, outputs, leaves))
            elif kind == ATTR:
                setattr(holder, key, _build(template, outputs, leaves))
            elif kind == GLOBAL:
                holder[key] = _build(template, outputs, leaves)
            else:  # CELL
                holder.cell_contents = _build(template, outputs, leaves)

    def describe(self) -> list[str]:
        """One line per replayed side effect, for explain."""
        names = {"extend": "append to", "setitems": "set items of", "setadd": "add to"}
        names["mode"] = "set the training mode of"
        return [f"{names.get(k, 'set')} {_label(h, key)}" for k, h, key, _ in self.actions]


def _label(holder: Any, key: Any) -> str:
    name = getattr(holder, "__name__", None) or type(holder).__name__
    return f"{name}.{key}" if key is not None else name


def _build(template: Template, outputs: list[Tensor], leaves: list[Any]) -> Any:
    tree, tensors = template
    if tree == "same":
        return tensors
    sources = {"output": outputs, "input": leaves}
    built = [body if kind == "same" else sources[kind][body] for kind, body in tensors]
    return pytree.unflatten(tree, built)


def _stored_leaf(value: Any) -> bool:
    """``flatten``'s ``is_leaf`` for a value the call stores, whose leaves are its tensors:
    functions and classes stay the same objects (statics), and any other object fails closed:
    a plan cannot rebuild it."""
    if isinstance(value, Tensor):
        return True
    if callable(value) or isinstance(value, type):
        return False  # the same object is stored each call
    raise NotReplayable(
        f"the compiled function stores a new {type(value).__name__} object in the "
        "environment; a plan cannot rebuild it. Store tensors, numbers or containers of them"
    )


class ReplayBuilder:
    """Turns the recorder's changes into a Replay; tensors made by the call become outputs."""

    def __init__(self, recorder: EnvRecorder, tracer: Any, outputs: list[Tensor]) -> None:
        self.recorder, self.tracer = recorder, tracer
        self.outputs = outputs  # the trace's output tensors; new ones are appended
        self._index = {id(t): k for k, t in enumerate(outputs)}

    def build(self, changes: list[Change]) -> Replay:
        replay = Replay()
        for change in changes:
            try:
                self._check_not_read(change)
                replay.actions.append(self._action(change))
            except NotReplayable as exc:  # say where: the line that made the change
                raise NotReplayable(exc.args[0], change.line) from None
        return replay

    def _check_not_read(self, change: Change) -> None:
        guarded = self.recorder.guarded_places()
        holder = id(change.holder)
        places = {(change.kind, holder, key_id(change.key))}
        if change.kind == CONTENT:
            places |= {p for p in guarded if p[1] == holder and p[0] in (ITEM, CONTENT)}
        if places & guarded:
            raise NotReplayable(
                f"the compiled function reads {change.label} and then changes it "
                f"({_short(change.old)} -> {_short(change.new)}); a graph cannot replay Python "
                "computation on a value's own previous state. Keep it outside the compiled "
                "function, or make it a tensor updated with dualflow.ops.assign"
            )

    def _action(self, change: Change) -> tuple:
        if change.new is MISSING:
            raise NotReplayable(f"the compiled function deletes {change.label}")
        if change.kind != CONTENT:
            kind = ATTR if change.kind == ATTR else change.kind
            return (kind, change.holder, change.key, self.template(change.new))
        holder, old, new = change.holder, change.old, change.new
        if isinstance(holder, list):
            if len(new) < len(old) or not all(same(a, b) for a, b in zip(old, new)):
                raise NotReplayable(
                    f"the compiled function changes {change.label} other than by appending"
                )
            return ("extend", holder, None, [self.template(v) for v in new[len(old) :]])
        if isinstance(holder, dict):
            before = dict(old)
            if any(k not in dict(new) for k in before):
                raise NotReplayable(f"the compiled function removes keys of {change.label}")
            pairs = [(k, self.template(v)) for k, v in new if not same(before.get(k, MISSING), v)]
            return ("setitems", holder, None, pairs)
        if not set(map(id, old)) <= set(map(id, new)):
            raise NotReplayable(f"the compiled function removes elements of {change.label}")
        added = [v for v in new if all(v is not o for o in old)]
        return ("setadd", holder, None, [self.template(v) for v in added])

    def template(self, value: Any) -> Template:
        """How to rebuild ``value`` at a later call (``pytree``'s containers, its tensors)."""
        label_of = self.recorder.label_of

        def outside(v: Any) -> bool:  # what the trace met outside, values compared by value
            return is_value(v) or label_of(v) is not None  # stay the same objects (statics)

        try:
            tensors, _, tree = pytree.flatten(
                value, "the stored value", is_leaf=_stored_leaf, stop=outside
            )
        except TracingError as exc:  # a container pytree cannot rebuild exactly
            raise NotReplayable(str(exc)) from None
        return tree, [self._tensor(t) for t in tensors]

    def _tensor(self, tensor: Tensor) -> tuple[str, Any]:
        position = self.tracer.input_positions.get(id(tensor))
        if position is not None:
            return ("input", position)
        if not self.tracer.made_here(tensor):
            return ("same", tensor)  # a parameter or other captured tensor: the same object
        k = self._index.get(id(tensor))
        if k is None:
            k = self._index[id(tensor)] = len(self.outputs)
            self.outputs.append(tensor)
        return ("output", k)


def _short(value: Any) -> str:
    if value is MISSING:
        return "absent"
    if is_value(value):
        text = repr(value)
        return text if len(text) < 40 else text[:37] + "..."
    if isinstance(value, tuple):  # a contents snapshot
        return f"{len(value)} entries"
    return type(value).__name__


__all__ = ["CELL", "NotReplayable", "Replay", "ReplayBuilder"]

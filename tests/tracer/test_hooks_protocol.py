"""The tracing interpreter implements ``TracingHooks`` exactly, and is the one slot's tracer.

A hook added to the protocol (what Tensor/Module/the engine call) but not to the interpreter, or
with another signature, fails here rather than as an AttributeError inside some user's trace.
"""

from __future__ import annotations

import inspect
import pathlib

import pytest

import dualflow
from dualflow import ops
from dualflow.autograd.eager import EAGER
from dualflow.ops import dispatch
from dualflow.ops.tracing_hooks import TracingHooks
from dualflow.tracer.interpreter import TracingInterpreter


def hook_names(protocol: type) -> list[str]:
    """The methods a protocol declares (its own, not ``Protocol``'s machinery)."""
    return sorted(
        name
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    )


def mismatches(protocol: type, cls: type) -> list[str]:
    """Each protocol method ``cls`` lacks or declares with other parameters or annotations."""
    found = []
    for name in hook_names(protocol):
        member = getattr(cls, name, None)
        if not callable(member):
            found.append(f"{name}: missing")
        elif inspect.signature(member) != inspect.signature(getattr(protocol, name)):
            want, got = inspect.signature(getattr(protocol, name)), inspect.signature(member)
            found.append(f"{name}: {got} instead of {want}")
    return found


def test_protocol_declares_the_hooks_the_code_calls() -> None:
    names = hook_names(TracingHooks)
    assert "on_new_tensor" in names and "on_grad_read" in names and "on_backward_node" in names
    for name in names:
        doc = getattr(TracingHooks, name).__doc__
        assert doc and doc.strip(), f"{name} has no docstring"


def test_tracing_interpreter_satisfies_the_protocol() -> None:
    assert mismatches(TracingHooks, TracingInterpreter) == []


def test_the_check_catches_a_missing_or_changed_hook() -> None:
    class OneSided(TracingInterpreter):
        on_module_write = None  # type: ignore[assignment]

        def on_grad_write(self, owner, grad, extra=None):  # type: ignore[override]
            return None

    found = mismatches(TracingHooks, OneSided)
    assert found[0] == "on_grad_write: (self, owner, grad, extra=None) instead of " + str(
        inspect.signature(TracingHooks.on_grad_write)
    )
    assert found[1] == "on_module_write: missing" and len(found) == 2


def test_tracing_reads_the_interpreter_slot() -> None:
    seen = []

    @dualflow.compile(fallback="error")
    def f(x):
        hooks = dispatch.tracing()
        seen.append(isinstance(hooks, TracingInterpreter) and hooks.hooks is hooks)
        return ops.sin(x) + 1.0

    assert dispatch.tracing() is None
    f(dualflow.tensor([0.5]))
    assert seen == [True]  # the current interpreter's hooks: the interpreter itself
    assert dispatch.tracing() is None  # the trace ended: the slot is empty again


def test_an_op_counting_interpreter_is_not_a_tracer() -> None:
    class Counter:
        hooks = None

        def __init__(self) -> None:
            self.calls = 0

        def apply(self, op, args, attrs):
            self.calls += 1
            return EAGER.apply(op, args, attrs)

    counter = Counter()
    with dispatch.interpreting(counter):
        assert dispatch.tracing() is None
        x = dualflow.tensor([1.0, 2.0])  # no hook runs: nothing to report to
        assert (x * 2).tolist() == [2.0, 4.0]
    assert counter.calls == 1


@pytest.mark.parametrize("name", hook_names(TracingHooks))
def test_every_hook_is_called_from_the_package(name: str) -> None:
    # A protocol member nothing calls is dead weight: the protocol lists what the code reports.
    root = pathlib.Path(dualflow.__file__).parent
    outside = [
        p for p in root.rglob("*.py") if p.parent.name != "tracer" and p.parent != root / "ops"
    ]
    callers = [p for p in outside if f".{name}(" in p.read_text()]
    assert callers, f"no module outside the tracer calls {name}"

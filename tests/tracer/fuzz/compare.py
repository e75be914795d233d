"""Run a spec eagerly and compiled and compare everything: per call the outcome (outputs, or the
exception), the input's gradient, and every piece of state (``Program.snapshot``).

``differences(spec, passes)`` lists every mismatch bit by bit; ``rule_violations(spec)`` checks
each node of the O2 graphs against the documented rule bounds (``dualflow.debug.check_rules``).
"""

from __future__ import annotations

import gc
import sys
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

import dualflow
from dualflow._pending import Pending
from dualflow._undo import UndoLog
from dualflow.debug import check_rules
from dualflow.tracer.eager_call import run_undoably
from dualflow.tracer.lazy_choice import EAGER, LAZY, LazyOrEager
from tests.tracer.fuzz.bits import first_difference
from tests.tracer.fuzz.build import Program, build
from tests.tracer.fuzz.fragments import registry
from tests.tracer.fuzz.kernel_settings import kernel_settings
from tests.tracer.fuzz.spec import Spec
from tests.tracer.helpers import arrays_of, current_trace


@dataclass
class Record:
    """One call: ``("ok", arrays)`` or ``("raised", type name, message)``, and the state after."""

    outcome: tuple
    state: dict[str, Any]


@dataclass
class Run:
    """The records of every call, the function that ran (compiled or not), its program and the
    compiled function's "runs eagerly from now on" warnings."""

    records: list[Record]
    fn: Any
    program: Program
    fallbacks: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # what calls left alive of themselves
    unrestored: list[str] = field(default_factory=list)  # raised calls that kept a write


FALLBACK_WARNING = "from now on"  # runs eagerly / by lazy re-execution from now on


def may_fall_back(spec: Spec) -> bool:
    """Whether a fragment of ``spec`` may make a compiled step run eagerly (``falls_back``).

    Example:
        >>> from tests.tracer.fuzz.spec import Piece
        >>> may_fall_back(Spec(1, body=(Piece.of("mask_read", kind="index", from_call=0),)))
        True
    """
    fragments = registry()
    return any(fragments[piece.name].falls_back for piece in spec.body)


def raises_late(spec: Spec) -> bool:
    """Whether a fragment of ``spec`` may raise after the step wrote state (``raises_late``):
    the eager reference then runs every call all or nothing, as a compiled call does.

    Example:
        >>> from tests.tracer.fuzz.spec import Piece
        >>> raises_late(Spec(1, body=(Piece.of("raise_late", kind="flag", at=1, where="step"),)))
        True
    """
    fragments = registry()
    return any(fragments[piece.name].raises_late for piece in spec.body)


def _all_or_nothing(step: Callable[..., Any]) -> Callable[..., Any]:
    # the eager step with a compiled call's promise: every write undone when it raises
    return lambda *args: run_undoably(step, args, {}, lambda: None)


def run(
    spec: Spec,
    passes: str | None = None,
    keep_outputs: bool = True,
    between: Callable[[int], None] | None = None,
    lazy: bool | str = True,
) -> Run:
    """Build ``spec`` and call it ``spec.calls`` times: eagerly, or compiled with ``passes``.

    The records hold each call's very output arrays (a later call overwriting one shows as a
    mismatch), or with ``keep_outputs=False`` copies, so the next call may write the dropped
    arrays again (``runtime.memory``'s recycled outputs). ``between(call)`` runs before each
    call (a test waiting for background compiles)."""
    with kernel_settings(spec):
        return _run(spec, passes, keep_outputs, between, lazy)


def _run(
    spec: Spec,
    passes: str | None,
    keep_outputs: bool,
    between: Callable[[int], None] | None,
    lazy: bool | str,
) -> Run:
    program = build(spec)
    fn = program.step
    if passes is not None:  # a fallback fails the comparison unless a fragment may cause it
        fallback = "eager" if may_fall_back(spec) else "error"
        switching = lazy == "switching"  # off the fast path at once, every other call eagerly
        fn = dualflow.compile(
            program.step, passes=passes, fallback=fallback, lazy=True if switching else lazy
        )
        if switching:
            fn._lazy_reason, fn._lazy_choice = "the fuzzer's switching runs", Alternating()
    late = raises_late(spec)
    if late and passes is None:
        fn = _all_or_nothing(fn)
    records, fallbacks, left, unrestored = [], [], [], []
    for call in range(spec.calls):
        if between is not None:
            between(call)
        program.before(call)
        args = program.inputs(call)
        before = program.snapshot() if late else {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            records.append(Record(_outcome(spec, program, fn, args, keep_outputs), {}))
        if passes is not None:  # before the snapshot reads (and so computes) every .grad
            left += left_behind(program, fn)
        records[-1].state = program.snapshot()
        if late and records[-1].outcome[0] == "raised":
            kept = _kept(before, records[-1], program.scope.kept_on_raise)
            unrestored += [f"call {call} raised and kept {line}" for line in kept]
        fallbacks += [str(w.message) for w in caught if FALLBACK_WARNING in str(w.message)]
    return Run(records, fn, program, fallbacks, left, unrestored)


def _kept(before: dict[str, Any], record: Record, python_objects: set[str]) -> list[str]:
    """Every piece of state a raised call left other than it found it, but the Python objects
    the step mutates itself (``python_objects``: those keep what ran, eager or compiled; the
    comparison with eager checks them)."""
    found = diff_records(Record(record.outcome, before), record)
    return [line for line in found if line.split(":")[0] not in python_objects]


def _outcome(spec: Spec, program: Program, fn: Any, args: tuple, keep_outputs: bool) -> tuple:
    try:
        with program.context():
            arrays = arrays_of(fn(*args))
            if not keep_outputs:
                arrays = [np.array(a, copy=True) for a in arrays]
        if spec.penalty > 0:
            grad = args[0].grad
            arrays.append(None if grad is None else np.array(grad.numpy(), copy=True))
        return ("ok", arrays)
    except Exception as exc:  # compared with eager's: same type and message
        return ("raised", type(exc).__name__, str(exc))


def _value_difference(got: Any, want: Any) -> str:
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        if not isinstance(got, np.ndarray) or not isinstance(want, np.ndarray):
            return f"{type(got).__name__} vs {type(want).__name__}"
        return first_difference(got, want)
    return "" if got == want else f"{got!r} vs {want!r}"


def diff_records(want: Record, got: Record) -> list[str]:
    """Every way one compiled call's record differs from the eager one."""
    raised = want.outcome[0] == "raised"
    if want.outcome[0] != got.outcome[0] or (raised and got.outcome != want.outcome):
        return [f"outcome {got.outcome[:3]} vs eager {want.outcome[:3]}"]
    found = []
    if want.outcome[0] == "ok":
        outs_w, outs_g = want.outcome[1], got.outcome[1]
        if len(outs_w) != len(outs_g):
            return [f"{len(outs_g)} outputs vs eager {len(outs_w)}"]
        for i, (g, w) in enumerate(zip(outs_g, outs_w)):
            why = _value_difference(g, w)
            found += [f"output {i}: {why}"] if why else []
    if set(want.state) != set(got.state):
        return [*found, f"state keys {sorted(got.state)} vs eager {sorted(want.state)}"]
    for key in want.state:
        why = _value_difference(got.state[key], want.state[key])
        found += [f"{key}: {why}"] if why else []
    return found


def diff_runs(want: Run, got: Run) -> list[str]:
    """Every mismatch of a compiled run against the eager run, call by call."""
    return [
        f"call {call}: {line}"
        for call, (w, g) in enumerate(zip(want.records, got.records))
        for line in diff_records(w, g)
    ]


def differences(
    spec: Spec,
    passes: str,
    eager: Run | None = None,
    keep_outputs: bool = True,
    between: Callable[[int], None] | None = None,
) -> list[str]:
    """Run ``spec`` eagerly (unless given) and compiled with ``passes``; list every mismatch.

    A compiled function that gave up and runs eagerly would compare equal without proving
    anything, so that is reported as a mismatch too, unless a fragment reached a path no trace
    can follow (``Scope.eager_reasons`` of the eager run): then the compiled step must have
    given up with exactly one RuntimeWarning, and still equal eager.

    Example:
        >>> from tests.tracer.fuzz.spec import Piece
        >>> differences(Spec(1, body=(Piece("transpose_pair", (("kind", "scale"),)),)), "O0")
        []
    """
    eager = eager if eager is not None else run(spec)
    compiled = run(spec, passes, keep_outputs, between)
    found = diff_runs(eager, compiled) + eager.unrestored + compiled.unrestored
    stats = compiled.fn.stats()
    if eager.program.scope.eager_reasons:  # eager took a path a trace cannot follow
        gave_up = compiled.fn._eager_reason or compiled.fn._lazy_reason
        if len(compiled.fallbacks) != 1 or not gave_up:
            found.append(f"expected one fallback warning, got {compiled.fallbacks} ({stats})")
        return found
    # every call traced (the environment or the batch changed each time) is no evidence either
    # way, but never vacuous: each traced call ran under the tracer and was compared
    raised = sum(r.outcome[0] == "raised" for r in compiled.records)
    left = compiled.fn._eager_reason or compiled.fn._lazy_reason  # the fast path gave up
    if left or (not stats.plan_runs and stats.traces + raised < spec.calls):
        found.append(f"no plan ran, or the compiled step fell back to eager ({stats})")
    return found


class Alternating(LazyOrEager):
    """Off the fast path, every other call eagerly (what ``lazy_choice`` may do at any call):
    the lazy path's plans, the optimizer's state and the random stream carry across."""

    def __init__(self) -> None:
        super().__init__(measured=False)
        self.calls = 0

    def _path(self) -> str:
        self.calls += 1
        return EAGER if self.calls % 2 == 0 else LAZY


def lazy_differences(spec: Spec, passes: str, lazy: str = "always") -> tuple[list[str], int]:
    """Run ``spec`` eagerly and by lazy re-execution from the first call (``lazy="always"``,
    or ``"switching"``: every other call eagerly, as ``lazy_choice`` may decide); list every
    mismatch, and count the segments plans ran (the evidence: a program whose calls all record
    different graphs runs op by op, which proves less).

    Example:
        >>> from tests.tracer.fuzz.spec import Piece
        >>> found, plans = lazy_differences(Spec(3, body=(Piece.of("unary", kind="tanh"),)), "O0")
        >>> found, plans >= 2  # 2 or 3: whether the last call's kernels were compiled by then
        ([], True)
    """
    eager = run(spec)
    compiled = run(spec, passes, lazy=lazy)
    found = diff_runs(eager, compiled) + compiled.left + eager.unrestored + compiled.unrestored
    return found, compiled.fn.stats().lazy_plan_segments


def left_behind(*roots: Any) -> list[str]:
    """What a call left alive of itself, reachable from ``roots`` (the program, the compiled
    function): a lazily recorded value still holding its recorder (which holds that call's undo
    log, its saved copies and, through them, the calls before), or an undo log.

    Example:
        >>> from tests.tracer.fuzz.spec import Piece
        >>> run(Spec(2, body=(Piece.of("unary", kind="tanh"),)), "O0", lazy="always").left
        []
    """
    found = []
    for obj in _reachable(roots):
        if type(obj) is Pending and obj.owner is not None:
            found.append(f"a {obj.shape} value computed lazily still holds its call's recorder")
        elif type(obj) is UndoLog:
            found.append("an undo log outlived its call")
    return found


SKIPPED = (ModuleType, weakref.ProxyType, weakref.CallableProxyType)


def _reachable(roots: tuple, limit: int = 200_000) -> list[Any]:
    """Objects reachable from ``roots`` through their references, short of modules' globals
    and classes (the whole process is reachable from those)."""
    stop = {id(vars(m)) for m in list(sys.modules.values()) if m is not None}
    seen, todo, found = set(), list(roots), []
    while todo and len(seen) < limit:
        obj = todo.pop()
        kind = type(obj)  # not isinstance: a dead weak proxy raises on any look inside
        if id(obj) in seen or id(obj) in stop or kind in SKIPPED or issubclass(kind, type):
            continue
        seen.add(id(obj))
        found.append(obj)
        todo.extend(gc.get_referents(obj))
    return found


def rule_violations(spec: Spec, passes: str = "O2") -> tuple[list[str], set[str]]:
    """Check every node of ``passes``' graphs of the spec's traces, call by call, against the
    documented rules (``dualflow.debug.check_rules``: the node computed by the plan's kernel
    from eager's inputs vs eager's value). Returns (violations, names of the rules that apply).
    """
    program = build(spec)
    fallback = "eager" if may_fall_back(spec) else "error"
    fn = dualflow.compile(program.step, passes="O0", fallback=fallback)
    violations: list[str] = []
    rules: set[str] = set()
    for call in range(spec.calls):
        if fn.stats().eager_fallbacks:  # gave up (a boolean mask read): no plan runs now
            break
        program.before(call)
        args = program.inputs(call)
        with program.context():
            try:
                trace, inputs = current_trace(fn, args)
            except AssertionError:  # no trace yet: this call traces
                trace = None
            if trace is not None:
                state = [np.array(ref.read(), copy=True) for ref in trace.checks.refs]
                for check in check_rules(trace.graph, inputs, state, passes):
                    rules.update(check.rules)
                    if not check.within:
                        violations.append(f"call {call}: {check}")
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    fn(*args)
            except ValueError:  # a fragment refusing this call (raise_early): nothing to check
                continue
    return violations, rules


def compiled_as_eager(
    spec: Spec, passes: tuple[str, ...] = ("O0", "exact"), eager: Run | None = None
) -> list[str]:
    """Every mismatch of ``spec`` compiled with each of ``passes`` against one eager run (``eager``
    when given; each line names its passes).

    Example:
        >>> from tests.tracer.fuzz.spec import Piece
        >>> compiled_as_eager(Spec(2, body=(Piece.of("unary", kind="tanh"),)))
        []
    """
    eager = eager if eager is not None else run(spec)
    return [f"{p}: {line}" for p in passes for line in differences(spec, p, eager=eager)]


def assert_matches_eager(spec: Spec) -> None:
    """O0 and the exact pipeline give eager's bits, and O2 keeps to its rules (fixed programs).

    Example:
        >>> from tests.tracer.fuzz.spec import Piece
        >>> assert_matches_eager(Spec(3, body=(Piece.of("unary", kind="tanh"),)))
    """
    found = compiled_as_eager(spec)
    assert found == [], f"{spec!r}:\n" + "\n".join(found[:10])
    violations, _ = rule_violations(spec)
    assert violations == [], f"{spec!r}:\n" + "\n".join(violations[:10])

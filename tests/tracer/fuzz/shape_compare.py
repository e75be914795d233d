"""Compare a spec whose batch changes between calls (issue 39) with eager, call by call.

A new batch size can make a call fail where earlier ones passed (an index past the rows of a
batch of 1, BatchNorm training on one row). Both runs must then raise the same error, but their
states may differ by design: eager has done the call's writes up to the error (``zero_grad``'s
``.grad = None``, BatchNorm's batch count, as PyTorch does), a compiled call is all or nothing.
So a failed call's compiled state must equal its state just before the call (after the
between-call hooks), and the comparison stops there; calls that pass are compared bit for bit.
"""

from __future__ import annotations

import warnings

import dualflow
from tests.tracer.fuzz.build import build
from tests.tracer.fuzz.compare import (
    Record,
    _outcome,
    diff_records,
    diff_runs,
    differences,
    may_fall_back,
    run,
)
from tests.tracer.fuzz.spec import Spec


def _compiled_calls(
    spec: Spec, passes: str, lazy: bool | str
) -> tuple[list[tuple[dict, Record]], object]:
    # each call's state just before it (hooks run) and its record; and the compiled function
    program = build(spec)
    fallback = "eager" if may_fall_back(spec) else "error"
    fn = dualflow.compile(program.step, passes=passes, fallback=fallback, lazy=lazy)
    calls = []
    for call in range(spec.calls):
        program.before(call)
        before, args = program.snapshot(), program.inputs(call)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # checked below: left the fast path
            outcome = _outcome(spec, program, fn, args, True)
        calls.append((before, Record(outcome, program.snapshot())))
    return calls, fn


def changing_differences(spec: Spec, passes: str, lazy: bool | str = True) -> list[str]:
    """Every mismatch of ``spec`` compiled with ``passes`` against eager (``differences`` when
    no eager call raised; else up to the first failed call, which must change nothing).
    ``lazy="always"``: every call by lazy re-execution.

    Example:
        >>> from tests.tracer.fuzz.spec import Piece
        >>> spec = Spec(1, batches=(3, 1, 3, 5), body=(Piece.of("unary", kind="tanh"),))
        >>> changing_differences(spec, "O0")
        []
    """
    eager = run(spec)
    if all(record.outcome[0] == "ok" for record in eager.records):
        if lazy == "always":
            compiled = run(spec, passes, lazy=lazy)
            return diff_runs(eager, compiled) + compiled.left
        return differences(spec, passes, eager=eager)
    calls, fn = _compiled_calls(spec, passes, lazy)
    found = []
    for call, (want, (before, got)) in enumerate(zip(eager.records, calls)):
        lines = diff_records(want, got)
        if lines and want.outcome[0] == "raised" and got.outcome == want.outcome:
            unchanged = diff_records(Record(got.outcome, before), got)
            found += [f"call {call}: the failed compiled call changed {line}" for line in unchanged]
            break  # eager did part of the call: the states differ from here on
        found += [f"call {call}: {line}" for line in lines]
    left = fn._eager_reason or (fn._lazy_reason and lazy != "always")
    if left and not eager.program.scope.eager_reasons:
        found.append(f"the compiled step left the fast path ({fn.stats()})")
    return found

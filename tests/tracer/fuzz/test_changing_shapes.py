"""The differential fuzzer with batch sizes that change between calls (issue 39): drawn programs
go back and forth between up to three leading dimensions (batch 1 among them), and compiled at
O0 and with ``passes="exact"`` every call equals eager bit for bit (outputs, errors, every piece
of state). Today each size is a trace of its own; with symbolic dimensions one trace serves them.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, given, settings

from tests.tracer.fuzz.compare import compiled_as_eager, run
from tests.tracer.fuzz.generator import FAST, specs
from tests.tracer.fuzz.shape_compare import changing_differences
from tests.tracer.fuzz.spec import Piece, Spec
from tests.tracer.fuzz.test_fuzz import _exact as exact_check


def _fuzz(examples: int, check: Callable[[Spec], None]) -> list[Spec]:
    """Run ``check`` on ``examples`` drawn specs whose batch changes (deterministically)."""
    ran: list[Spec] = []

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(spec=specs(FAST, changing=True))
    def fuzz(spec: Spec) -> None:
        ran.append(spec)
        check(spec)

    fuzz()
    return ran


def _exact(passes: str) -> Callable[[Spec], None]:
    return exact_check(passes, changing_differences)


def _lazily_exact(spec: Spec) -> None:
    found = changing_differences(spec, "O0", lazy="always")
    assert not found, f"{spec!r} lazily:\n" + "\n".join(found[:10])


def _revisits(spec: Spec) -> bool:
    # a call at a size an earlier call had, after another size: a plan (or symbolic trace) runs
    return any(
        b in spec.batches[:i] and b != spec.batches[i - 1] for i, b in enumerate(spec.batches)
    )


def test_drawn_batches_change_between_calls() -> None:
    drawn = _fuzz(40, lambda spec: None)
    assert all(len(set(s.batches)) >= 2 and s.calls >= 4 for s in drawn)
    assert sum(1 in s.batches for s in drawn) >= 5  # batch 1: where semantics may change
    assert sum(_revisits(s) for s in drawn) >= 10
    assert sum(len(set(s.batches)) == 3 for s in drawn) >= 5


def test_changing_batches_at_o0_are_bit_identical_to_eager() -> None:
    assert len(_fuzz(40, _exact("O0"))) >= 40


def test_changing_batches_with_the_exact_pipeline_are_bit_identical_to_eager() -> None:
    assert len(_fuzz(30, _exact("exact"))) >= 30


def test_changing_batches_run_lazily_are_bit_identical_to_eager() -> None:
    # every call by lazy re-execution: a call failing at a new size fails at eager's line
    assert len(_fuzz(20, _lazily_exact)) >= 20


def test_a_fixed_program_back_and_forth_runs_plans_and_equals_eager() -> None:
    spec = Spec(5, batches=(4, 9, 4, 1, 9, 4), body=(Piece.of("unary", kind="tanh"),))
    assert compiled_as_eager(spec) == []
    stats = run(spec, "exact").fn.stats()
    assert stats.traces <= 3 and stats.plan_runs >= 3, stats


ROWS_AT_BATCH_1 = Spec(  # found by this fuzzer: the fragment indexes row 1, absent at batch 1
    0,
    width=64,
    batches=(64, 64, 64, 1),
    body=(Piece.of("index_syntax", kind="rows_colon_global"),),
    optimizer="adadelta",
)


ROWS_AT_BATCH_1_EVAL = Spec(  # found by this fuzzer (seventeenth session): a plan step raises
    0,
    width=64,
    batches=(64, 64, 2, 1),
    body=(Piece.of("index_syntax", kind="rows_colon_global"),),
    optimizer=None,
    mode="eval",
)


def test_an_eval_call_failing_at_a_new_size_raises_eagers_very_message() -> None:
    for passes in ("O0", "exact"):  # a plan step raises: the call re-runs eagerly
        assert changing_differences(ROWS_AT_BATCH_1_EVAL, passes) == []


def test_a_call_failing_at_a_new_size_lazily_raises_at_eagers_line() -> None:
    for spec in (ROWS_AT_BATCH_1, ROWS_AT_BATCH_1_EVAL):
        assert changing_differences(spec, "O0", lazy="always") == []


def test_a_call_failing_at_a_new_size_fails_alike_and_changes_nothing_compiled() -> None:
    eager = run(ROWS_AT_BATCH_1)
    outcome = eager.records[-1].outcome
    assert outcome[0] == "raised" and outcome[1] == "GetItemError"
    assert eager.records[-1].state["param0.grad"] is None  # eager's zero_grad ran first
    for passes in ("O0", "exact"):
        assert changing_differences(ROWS_AT_BATCH_1, passes) == []

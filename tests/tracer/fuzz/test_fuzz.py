"""The differential fuzzer's profiles: random training steps and inference programs, compiled
(O0 and ``passes="exact"``: bit for bit equal to eager, every output and piece of state, every
call) and at O2 (every node a pass rewrote within its documented rule's bound, and bit for bit
equal end to end when no value-changing rule applies). The fast profile runs by default; the slow
one (``pytest -m slow``) runs at least 2,000 programs at O0.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings

import dualflow.runtime.out_forward as out_forward
from tests.tracer.fuzz.compare import differences, rule_violations
from tests.tracer.fuzz.generator import FAST, SLOW, Profile, specs
from tests.tracer.fuzz.spec import Piece, Spec


def _fuzz(profile: Profile, examples: int, check: Callable[[Spec], None]) -> int:
    """Run ``check`` on ``examples`` drawn specs (deterministically); returns how many ran."""
    ran = [0]

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(spec=specs(profile))
    def fuzz(spec: Spec) -> None:
        ran[0] += 1
        check(spec)

    fuzz()
    return ran[0]


def _exact(passes: str) -> Callable[[Spec], None]:
    def check(spec: Spec) -> None:
        found = differences(spec, passes)
        assert not found, f"{spec!r} at {passes}:\n" + "\n".join(found[:10])

    return check


def _within_rules(spec: Spec) -> None:
    violations, rules = rule_violations(spec)
    assert not violations, f"{spec!r}:\n" + "\n".join(violations[:10])
    if not rules:  # no value-changing rule applied: O2 must be bit-identical too
        found = differences(spec, "O2")
        assert not found, f"{spec!r} at O2 (no rule applies):\n" + "\n".join(found[:10])


def test_fast_o0_is_bit_identical_to_eager() -> None:
    assert _fuzz(FAST, 120, _exact("O0")) >= 120


def test_fast_exact_pipeline_is_bit_identical_to_eager() -> None:
    assert _fuzz(FAST, 40, _exact("exact")) >= 40


def test_fast_o2_differences_are_rules_within_their_bounds() -> None:
    assert _fuzz(FAST, 30, _within_rules) >= 30


@pytest.mark.slow
def test_slow_o0_is_bit_identical_to_eager() -> None:
    assert _fuzz(SLOW, 2000, _exact("O0")) >= 2000


@pytest.mark.slow
def test_slow_exact_pipeline_is_bit_identical_to_eager() -> None:
    assert _fuzz(SLOW, 500, _exact("exact")) >= 500


@pytest.mark.slow
def test_slow_o2_differences_are_rules_within_their_bounds() -> None:
    assert _fuzz(SLOW, 500, _within_rules) >= 500


def _piece(name: str, **params: object) -> Piece:
    return Piece(name, tuple(sorted(params.items())))


ISSUE_20 = Spec(
    1,
    width=128,
    batches=(64, 64, 64, 64),
    body=(_piece("transpose_pair", kind="scale"), _piece("unary", kind="elu"), _piece("batchnorm")),
    optimizer="nesterov",
)


def test_the_fuzzer_finds_issue_20s_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    assert differences(ISSUE_20, "O0") == []
    # planned out= into C buffers whatever the operands' layout: the bug this issue fixed
    monkeypatch.setattr(out_forward, "_CACHE", {})
    monkeypatch.setattr(out_forward, "c_ordered", lambda value: True)
    found = differences(ISSUE_20, "O0")
    assert found and found[0].startswith("call 2: ")  # the first plan run
    assert any("module0.running_mean" in line for line in found)  # BatchNorm's batch mean


def test_rule_checks_see_both_rules_and_hold() -> None:
    spec = Spec(
        7,
        width=64,
        batches=(64, 64, 64, 64),
        body=(_piece("linear_bn"), _piece("unary", kind="relu"), _piece("reduce", kind="sumsq")),
        mode="eval",
        optimizer=None,
    )
    violations, rules = rule_violations(spec)
    assert rules == {"fold_bn", "fused_sum"} and violations == []
    assert differences(spec, "exact") == []

"""The differential fuzzer's profiles: random training steps and inference programs, compiled
(O0 and ``passes="exact"``: bit for bit equal to eager, every output and piece of state, every
call) and at O2 (every node a pass rewrote within its documented rule's bound, and bit for bit
equal end to end when no value-changing rule applies). The fast profile runs by default; the slow
one (``pytest -m slow``) runs at least 2,000 programs at O0.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import dualflow
import dualflow.kernels.expr.out_forwards as out_forward
import dualflow.runtime.memory as memory
from dualflow import ops
from dualflow.kernels.base.lru_dict import Recent
from dualflow.kernels.conv import winograd
from dualflow.kernels.fused_cpu import fused_elementwise as kc
from dualflow.kernels.numba import background_compile, compile_worker, numba_elementwise
from dualflow.tensor.methods import inplace
from tests.tracer.fuzz import fragments
from tests.tracer.fuzz.build import OPTIMIZERS
from tests.tracer.fuzz.compare import (
    assert_matches_eager,
    compiled_as_eager,
    differences,
    lazy_differences,
    rule_violations,
    run,
)
from tests.tracer.fuzz.fragments import Fragment, Statement
from tests.tracer.fuzz.generator import FAST, SLOW, Profile, specs
from tests.tracer.fuzz.scope import Scope
from tests.tracer.fuzz.spec import Piece, Spec, fixed_program


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


def _exact(passes: str, compare: Callable = differences) -> Callable[[Spec], None]:
    """A check that ``compare(spec, passes)`` finds no difference from eager."""

    def check(spec: Spec) -> None:
        found = compare(spec, passes)
        assert not found, f"{spec!r} at {passes}:\n" + "\n".join(found[:10])

    return check


def _within_rules(spec: Spec) -> None:
    violations, rules = rule_violations(spec)
    assert not violations, f"{spec!r}:\n" + "\n".join(violations[:10])
    if not rules:  # no value-changing rule applied: O2 must be bit-identical too
        found = differences(spec, "O2")
        assert not found, f"{spec!r} at O2 (no rule applies):\n" + "\n".join(found[:10])


def test_fast_o0_is_bit_identical_to_eager() -> None:
    assert _fuzz(FAST, 100, _exact("O0")) >= 100


def test_fast_o0_with_every_output_recycled_or_kept_is_bit_identical(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every output gets a per-run buffer; dropped ones are written again by the next call, kept
    # ones (the records hold them) must never be
    monkeypatch.setattr(memory, "FRESH_MIN_BYTES", 0)

    def check(spec: Spec) -> None:
        for keep in (False, True):
            found = differences(spec, "O0", keep_outputs=keep)
            assert not found, f"{spec!r} keep_outputs={keep}:\n" + "\n".join(found[:10])

    assert _fuzz(FAST, 30, check) >= 30


def _lazy_exact(passes: str, plan_runs: list[int], lazy: str = "always") -> Callable[[Spec], None]:
    def check(spec: Spec) -> None:
        found, plans = lazy_differences(spec, passes, lazy)
        assert not found, f"{spec!r} lazily ({lazy}) at {passes}:\n" + "\n".join(found[:10])
        plan_runs.append(plans)

    return check


def test_fast_lazy_re_execution_is_bit_identical_to_eager() -> None:
    # the same programs with every call run by lazy re-execution (issue 35): its plans too
    plan_runs: list[int] = []
    assert _fuzz(FAST, 60, _lazy_exact("O0", plan_runs)) >= 60
    assert sum(n > 0 for n in plan_runs) >= len(plan_runs) // 2  # most ran plans, not op by op


def test_fast_lazy_or_eager_switching_is_bit_identical_to_eager() -> None:
    # off the fast path a call may run eagerly where that measured faster (lazy_choice): the
    # same programs with every other call eager, so state crosses between the two paths
    plan_runs: list[int] = []
    assert _fuzz(FAST, 30, _lazy_exact("O0", plan_runs, "switching")) >= 30
    assert sum(n > 0 for n in plan_runs) >= len(plan_runs) // 4


@pytest.mark.slow
def test_slow_lazy_re_execution_is_bit_identical_to_eager() -> None:
    plan_runs: list[int] = []
    assert _fuzz(SLOW, 1000, _lazy_exact("exact", plan_runs)) >= 1000
    assert sum(n > 0 for n in plan_runs) >= len(plan_runs) // 2


def test_fast_exact_pipeline_is_bit_identical_to_eager() -> None:
    assert _fuzz(FAST, 30, _exact("exact")) >= 30


def test_fast_o2_differences_are_rules_within_their_bounds() -> None:
    assert _fuzz(FAST, 20, _within_rules) >= 20


def test_fast_exact_with_kernels_from_the_compile_worker_is_bit_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # background compiling on, with a fresh store: each program's first plan runs run blocked
    # stand-ins while the worker compiles their kernels, its last call the worker's kernels
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_worker, "_enabled", True)
    monkeypatch.setattr(kc, "_CACHE", Recent(128))
    monkeypatch.setattr(numba_elementwise, "_MODULES", OrderedDict())
    asked, runner = [], background_compile._runner
    monkeypatch.setattr(background_compile, "_runner", lambda *a: asked.append(1) or runner(*a))

    def check(spec: Spec) -> None:
        def between(call: int) -> None:
            if call == spec.calls - 1:
                assert compile_worker.wait(120)

        found = differences(spec, "exact", between=between)
        assert not found, f"{spec!r} with the compile worker:\n" + "\n".join(found[:10])

    assert _fuzz(FAST, 15, check) >= 15
    assert len(asked) >= 15 and list(tmp_path.glob("kernels/__pycache__/*.nbc"))


@pytest.mark.slow
def test_slow_o0_is_bit_identical_to_eager() -> None:
    assert _fuzz(SLOW, 2000, _exact("O0")) >= 2000


@pytest.mark.slow
def test_slow_exact_pipeline_is_bit_identical_to_eager() -> None:
    assert _fuzz(SLOW, 500, _exact("exact")) >= 500


@pytest.mark.slow
def test_slow_o2_differences_are_rules_within_their_bounds() -> None:
    assert _fuzz(SLOW, 500, _within_rules) >= 500


ISSUE_20 = Spec(
    1,
    width=128,
    batches=(64, 64, 64, 64),
    body=(
        Piece.of("transpose_pair", kind="scale"),
        Piece.of("unary", kind="elu"),
        Piece.of("batchnorm"),
    ),
    optimizer="nesterov",
)


def test_the_fuzzer_finds_issue_20s_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    assert differences(ISSUE_20, "O0") == []
    # planned out= into C buffers whatever the operands' layout: the bug this issue fixed
    monkeypatch.setattr(out_forward, "_CACHE", {})
    monkeypatch.setattr(out_forward, "c_ordered", lambda value: True)
    # and a planner that does not know the transposed product allocates anyway (it gives such
    # steps no buffer now, so the broken check would not be reached)
    monkeypatch.setattr(memory, "surely_strided", lambda graph: set())
    found = differences(ISSUE_20, "O0")
    assert found and found[0].startswith("call 2: ")  # the first plan run
    assert any("module0.running_mean" in line for line in found)  # BatchNorm's batch mean


def test_rule_checks_see_both_rules_and_hold() -> None:
    spec = Spec(
        7,
        width=64,
        batches=(64, 64, 64, 64),
        body=(
            Piece.of("linear_bn"),
            Piece.of("unary", kind="relu"),
            Piece.of("reduce", kind="sumsq"),
        ),
        mode="eval",
        optimizer=None,
    )
    violations, rules = rule_violations(spec)
    assert rules == {"fold_bn", "fused_sum"} and violations == []
    assert differences(spec, "exact") == []


# the default run keeps one optimizer of each kind of state (none, moments, a clip, a schedule,
# a centred average); every optimizer runs with batch norm, dropout and assign in the default
# run too (test_late_raise.py, without the penalty), and all of these with -m slow
DEFAULT_RUN_OPTIMIZERS = ("sgd", "adam", "adam_clip_norm", "sgd_steplr", "rmsprop_centered")


@pytest.mark.parametrize(
    "optimizer",
    [
        name if name in DEFAULT_RUN_OPTIMIZERS else pytest.param(name, marks=pytest.mark.slow)
        for name in sorted(OPTIMIZERS)
    ],
)
def test_bn_dropout_assign_and_double_backward_with_every_optimizer(optimizer: str) -> None:
    spec = Spec(
        11,
        width=16,
        batches=(8, 8, 8, 8, 6),
        body=(
            Piece.of("dropout", ratio=0.3),
            Piece.of("batchnorm"),
            Piece.of("assign", kind="write_then_read", shape="row"),
            Piece.of("transpose_pair", kind="center"),
            Piece.of("unary", kind="tanh"),
        ),
        optimizer=optimizer,
        loss="xent",
        penalty=0.1,
    )
    assert compiled_as_eager(spec) == [], optimizer


def test_a_registered_fragment_with_extra_state_and_a_hook_is_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The extension points: a fragment's own state to compare and a between-calls mutation
    (here a buffer rewritten outside the step, which a compiled step reads by reference)."""

    def make(scope: Scope, piece: Piece) -> Statement:
        buf = scope.buffer((scope.width,))

        def hook(call: int) -> None:
            with dualflow.no_grad():
                ops.assign(buf, np.full(scope.width, 0.1 * call, scope.dtype))

        scope.between_calls(hook)
        scope.track("scale", lambda: float(buf.numpy()[0]))
        return lambda h, env: h * (1.0 + buf)

    monkeypatch.setattr(fragments, "_REGISTRY", dict(fragments.registry()))
    fragments.register(Fragment("rescaled", lambda draw, ctx: {}, make, weight=50))
    drawn = []

    def check(spec: Spec) -> None:
        drawn.append("rescaled" in spec.fragments())
        assert differences(spec, "O0") == []

    _fuzz(FAST, 10, check)
    assert any(drawn)
    spec = Spec(5, body=(Piece.of("rescaled"),))
    eager = run(spec)
    assert [r.state["extra.scale"] for r in eager.records] == pytest.approx([0.0, 0.1, 0.2, 0.3])


@pytest.mark.slow
def test_slow_ten_thousand_programs_with_the_python_environment() -> None:
    """Issue 13's long run: 10,000 programs (Python-environment reads that change between calls,
    side effects, branches and early raises among the fragments), bit for bit at O0."""
    assert _fuzz(SLOW, 10_000, _exact("O0")) >= 10_000


@pytest.mark.parametrize("pad", [1, 2])
def test_convolutions_through_the_winograd_kernels(pad: int, monkeypatch: pytest.MonkeyPatch):
    """The conv fragment at 64x64 (a 16 -> 16 channel 3x3 layer over 1,024 tiles: the Winograd
    kernels, forward and both gradients), with a gradient penalty and a batch change."""
    ran = set()
    for name in ("conv2d", "conv2d_grad_weight", "conv_transpose2d"):
        kernel = getattr(winograd, name)
        spy = lambda *a, _k=kernel, _n=name: (ran.add(_n), _k(*a))[1]  # noqa: E731
        monkeypatch.setattr(winograd, name, spy)
    spec = Spec(
        3,
        width=64,
        batches=(64, 64, 64, 64, 48),
        body=(Piece.of("conv", pad=pad), Piece.of("unary", kind="tanh")),
        optimizer="momentum",
        penalty=0.05,
    )
    assert compiled_as_eager(spec) == []
    assert ran == {"conv2d", "conv2d_grad_weight", "conv_transpose2d"}


@pytest.mark.parametrize("kind", ["detach", "data"])
def test_the_fuzzer_finds_stale_alias_reads(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a buffer read through x.detach() / x.data made in the step, its data rebound on call 2
    spec = Spec(4, width=8, body=(Piece.of("alias_read", kind=kind, change_at=2),))
    assert compiled_as_eager(spec) == []
    # the bug this fixed: the trace captured the alias it made, not the tensor it aliases
    monkeypatch.setattr(inplace, "tracing", lambda: None)
    found = differences(spec, "O0")
    assert found and found[0].startswith("call 2: ")


MORE_OPS = (
    Piece.of("pool", kind="max"),
    Piece.of("gather", kind="scatter_max"),
    Piece.of("where", at=0.0, scale=2),
    Piece.of("pieces", kind="split"),
    Piece.of("layer_norm"),
    Piece.of("methods", kind="max_dim"),
    Piece.of("inplace_detached"),
    Piece.of("cross_entropy", kind="none"),
    Piece.of("float64"),
    Piece.of("embedding"),
    Piece.of("gather", kind="sort"),
    Piece.of("pool", kind="avg"),
)


@pytest.mark.parametrize(
    ("dtype", "mode", "penalty"),
    [("float32", "train", 0.1), ("float64", "train", 0.0), ("float32", "eval", 0.0)],
)
def test_more_ops_fragments_in_one_program_are_bit_identical(
    dtype: str, mode: str, penalty: float
) -> None:
    """more_ops' fragments (pooling, gathers, where, split, layer norm, Tensor methods, in-place
    writes on a detached value, cross entropy, float64, embedding) in one program, the batch
    changing once: O0 and the exact pipeline give eager's bits, and O2 keeps to its rules."""
    spec = fixed_program(3, MORE_OPS, 12, dtype, mode, penalty)
    assert set(spec.fragments()) == {
        "pool",
        "gather",
        "where",
        "pieces",
        "layer_norm",
        "methods",
        "inplace_detached",
        "cross_entropy",
        "float64",
        "embedding",
    }
    assert_matches_eager(spec)


LAYERS = (
    Piece.of("recurrent", kind="LSTM"),
    Piece.of("attention", kind="multihead"),
    Piece.of("norm", kind="group"),
    Piece.of("image", kind="shuffle"),
    Piece.of("recurrent", kind="GRU"),
    Piece.of("attention", kind="encoder"),
    Piece.of("norm", kind="instance"),
    Piece.of("image", kind="transpose"),
)


@pytest.mark.parametrize(("dtype", "penalty"), [("float32", 0.1), ("float64", 0.0)])
def test_layer_fragments_in_one_program_are_bit_identical(dtype: str, penalty: float) -> None:
    """layers' fragments (LSTM and GRU over the rows, attention, an encoder layer, group and
    instance norm, PixelShuffle and ConvTranspose2d images) in one training program whose
    sequence length changes once: O0 and the exact pipeline give eager's bits."""
    spec = Spec(4, dtype=dtype, width=8, batches=(5, 5, 5, 7), body=LAYERS, penalty=penalty)
    assert compiled_as_eager(spec) == []

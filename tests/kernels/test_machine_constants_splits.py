"""kernels.base.machine_constants, the compute-bound splits: the batched GEMM's, softmax's and
pooling's part sizes follow from the measured hand-off and one-thread rates (synthetic timings
here: nothing is timed against a bound), keep their defaults with a note when the probe cannot
say, an old cache record without the new fields is measured again, and an elementwise kernel
that computes more per element splits from fewer elements than a copy, with the same bits."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from dualflow.background.process import using_threads
from dualflow.kernels.base import machine_constants as mc
from dualflow.kernels.base import native_crew, per_machine
from dualflow.kernels.expr.kernel_work import work_ratio
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.fast_math.work_weights import DEFAULTS as WEIGHTS
from dualflow.kernels.fast_math.work_weights import LIGHT
from dualflow.kernels.linalg import gemm
from dualflow.kernels.numba import numba_elementwise
from dualflow.kernels.pool import pool_kernels
from tests.kernels.test_machine_constants import TIMINGS

softmax_module = importlib.import_module("dualflow.ops.softmax")  # dualflow.ops.softmax: the op
SPLITS = ("part_flops", "softmax_part_min", "pool_part_min")


def test_a_part_takes_four_hand_offs_of_one_thread_time() -> None:
    c = mc.derive(TIMINGS)
    # 100 us hand-off; 60 GFLOP/s; 65536 softmax elements in 100 us; copies of 1.25 G elements/s
    assert mc.HANDOFFS_PER_PART == 4
    assert c.part_flops == 24_000_000
    assert c.softmax_part_min == 262_144
    assert c.pool_part_min == round(4e-4 * 1.25e9 / mc.POOL_COPIES)
    # a dearer hand-off asks for proportionally bigger parts; a faster softmax too
    dear = mc.derive({**TIMINGS, "handoff_s": 2e-4, "split_s": 7e-4})
    for name in SPLITS:  # rounded once each
        assert abs(getattr(dear, name) - 2 * getattr(c, name)) <= 1
    assert mc.derive({**TIMINGS, "softmax_s": 5e-5}).softmax_part_min == 524_288


def test_a_split_copy_that_saved_nothing_keeps_only_the_copies_defaults() -> None:
    # this VM: a second thread adds no copy bandwidth, but compute-bound parts still pay
    lost = mc.derive({**TIMINGS, "split_s": 1.2e-3})
    assert (lost.part_min, lost.part_min_bytes) == (
        mc.DEFAULTS.part_min,
        mc.DEFAULTS.part_min_bytes,
    )
    assert [getattr(lost, n) for n in SPLITS] == [getattr(mc.derive(TIMINGS), n) for n in SPLITS]
    assert "saved -10%" in lost.note


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"threads": 1}, "one thread"),
        ({"handoff_s": 1e-7}, "no hand-off"),
        ({"handoff_s": 0.05, "split_s": 0.0506}, "part_flops 12000000000 out of"),
    ],
)
def test_the_splits_keep_their_defaults_when_the_probe_cannot_say(change, said) -> None:
    c = mc.derive({**TIMINGS, **change})
    assert [getattr(c, n) for n in SPLITS] == [1 << 23, 1 << 16, 1 << 15]
    assert said in c.note and c.note.startswith("measured")


def test_each_bound_alone_keeps_its_default() -> None:
    slow_softmax = mc.derive({**TIMINGS, "softmax_s": 1.0})  # 26 elements a part
    assert slow_softmax.softmax_part_min == mc.DEFAULTS.softmax_part_min
    assert "softmax_part_min 26 out of" in slow_softmax.note
    assert slow_softmax.part_flops == 24_000_000  # the others stand


def test_describe_names_every_value() -> None:
    text = mc.derive(TIMINGS).describe()
    for name in ("part_min_bytes 500000", "part_flops 24000000", "softmax_part_min 262144"):
        assert name in text
    assert text.startswith("machine constants: balance 6 FLOP/byte, part_min 125000 elements, ")


def test_an_old_record_without_the_new_timings_is_measured_again(fresh_cache, monkeypatch) -> None:
    store = per_machine.open_store("kernels")
    name = mc._CONSTANTS.entry_name()
    old = {k: v for k, v in TIMINGS.items() if not k.startswith("softmax")}  # last session's
    store.save(name, json.dumps({"timings": old, "derived": {}}).encode())
    measured = []
    monkeypatch.setattr(mc, "measure", lambda: measured.append(1) or dict(TIMINGS))
    assert mc.machine_constants() == mc.derive(TIMINGS) and measured == [1]
    record = json.loads(store.load(name))  # replaced by a record of the new fields
    assert set(record["timings"]) == set(mc.FIELDS) and record["derived"]["part_flops"] > 0
    mc.forget()
    assert mc.machine_constants().softmax_part_min == 262_144 and measured == [1]


def test_the_kernels_read_the_machine_values_unless_overridden(fresh_cache, monkeypatch) -> None:
    monkeypatch.setattr(mc, "measure", lambda: dict(TIMINGS))
    assert gemm.part_flops() == 24_000_000
    assert pool_kernels.part_min((2, 2), (2, 2)) == mc.derive(TIMINGS).pool_part_min
    # a 3x3 window at stride 1 reads each element 9 times: its split pays 9 times sooner
    assert pool_kernels.part_min((3, 3), (1, 1)) == mc.derive(TIMINGS).pool_part_min // 9
    # two parts of the measured 262144 elements (float16: the numpy form's split; rows short
    # enough that their sums of exp(0) stay finite in float16)
    x = np.zeros((4096, 128), np.float16)
    calls = []
    monkeypatch.setattr(softmax_module, "_split_rows", lambda x, n: calls.append(n) or x)
    with using_threads(2):
        softmax_module.Softmax.forward(np, x, axis=-1)
        softmax_module.Softmax.forward(np, x[:, :-1], axis=-1)  # not C-ordered: one call
        softmax_module.Softmax.forward(np, x[:1], axis=-1)  # one part's worth: one call
    assert calls == [2]
    monkeypatch.setattr(gemm, "PART_FLOPS", 5)
    monkeypatch.setattr(pool_kernels, "PART_MIN", 7)
    assert gemm.part_flops() == 5 and pool_kernels.part_min((3, 3), (1, 1)) == 7


def _program(expr: tuple) -> object:
    return lower_expr(expr, ("a0",), ("float32",))


TANH4 = ("var", "a0")
for _ in range(4):
    TANH4 = ("call", "tanh", TANH4)
NEGATE = ("call", "negative", ("var", "a0"))


def test_a_kernel_that_computes_more_gets_a_lower_threshold() -> None:
    assert work_ratio(_program(NEGATE)) == 1.0  # bound by its memory traffic, as a copy
    assert work_ratio(_program(TANH4)) == pytest.approx(4 * WEIGHTS.tanh)
    remainder = ("call", "remainder", ("var", "a0"), ("const", 3.0))  # not measured: LIGHT
    assert work_ratio(_program(("call", "tanh", remainder))) == WEIGHTS.tanh + LIGHT
    c = mc.DEFAULTS
    assert c.part_min_for(work_ratio(_program(TANH4))) < c.part_min_for(1.0) == c.part_min
    assert c.part_min_for(1e9) == mc.PART_MIN_FLOOR and c.part_min_for(0.1) == c.part_min


def test_a_heavy_kernel_splits_from_fewer_elements_with_the_same_bits(
    fresh_cache, monkeypatch
) -> None:
    monkeypatch.setattr(mc, "measure", lambda: dict(TIMINGS))  # part_min 125000 (a copy's)
    monkeypatch.setattr(numba_elementwise, "PART_MIN", None)
    # cpu_threads' split, where no native crew runs (tests/kernels/test_native_split.py has it)
    monkeypatch.setattr(native_crew, "_enabled", False)
    size = 65_536  # under a copy's two parts of 125000, over two of tanh^4's 22321
    x = np.random.default_rng(0).standard_normal(size).astype(np.float32) * 3
    parts = []
    real = numba_elementwise.run_parts
    monkeypatch.setattr(
        numba_elementwise, "run_parts", lambda jobs: parts.append(len(jobs)) or real(jobs)
    )
    results = {}
    with using_threads(2):
        for name, expr in (("negate", NEGATE), ("tanh4", TANH4)):
            kernel = numba_elementwise.numba_kernel(_program(expr), ((size,),), (size,))
            results[name] = kernel(np, x)
    assert parts == [2]  # the tanh chain only
    with using_threads(1):  # the same kernel in one part
        one = numba_elementwise.numba_kernel(_program(TANH4), ((size,),), (size,))(np, x)
    np.testing.assert_array_equal(results["tanh4"].view(np.uint32), one.view(np.uint32))
    np.testing.assert_array_equal(results["negate"], -x)


def test_the_copys_time_an_element_is_kept_as_the_unit_of_kernel_work() -> None:
    assert mc.derive(TIMINGS).copy_ns == 0.8  # 1 ms for 1.25M float32 elements
    slow = mc.derive({**TIMINGS, "copy_s": 100.0})  # 80 us an element: no machine's copy
    assert slow.copy_ns == mc.DEFAULTS.copy_ns == 0.27 and "copy_ns 80000.0 out of" in slow.note
    c = mc.DEFAULTS
    assert c.pool_part_min_for(mc.POOL_COPIES) == c.pool_part_min
    assert c.pool_part_min_for(2 * mc.POOL_COPIES) == c.pool_part_min // 2

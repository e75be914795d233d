"""kernels.fast_math.work_weights: each heavy function's weight follows from a probe's timings
(synthetic here: nothing is timed against a bound) in the copies of ``machine_constants``, an
implausible weight keeps its default with a note, the defaults are the development machine's
table exactly, the record is measured once per machine (an old record again, once), the probe
times the functions the fused kernels run, and the fused kernels' work ratio and the eager
float32 loops' split sizes follow the weights."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualflow.kernels.base import machine_constants as mc
from dualflow.kernels.base import per_machine
from dualflow.kernels.expr.kernel_work import work_ratio
from dualflow.kernels.expr.scalar_table import FUNCTIONS
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.fast_math import fast_exp, fast_tanh, float32_loops
from dualflow.kernels.fast_math import work_weights as ww
from dualflow.kernels.fast_math.scalars import tanh_f32

COPY_NS = 0.25
# per extra call and element: exp 0.5 ns, tanh 0.375, sqrt 0.15, divide 0.1, maximum 0.05
TIMINGS = dict(
    elements=1e5,
    exp1_s=2e-5,
    exp3_s=12e-5,
    tanh1_s=2e-5,
    tanh3_s=9.5e-5,
    sqrt1_s=1e-5,
    sqrt3_s=4e-5,
    divide1_s=1e-5,
    divide3_s=3e-5,
    maximum1_s=1e-5,
    maximum3_s=2e-5,
)
MEASURED = ww.WorkWeights(exp=2.0, tanh=1.5, sqrt=0.6, divide=0.4, maximum=0.2, note="measured")


@pytest.fixture
def weights_cache(tmp_path, monkeypatch):
    """An empty kernels cache, measured values, the machine constants' copy at ``COPY_NS``;
    yields the cache's kernels folder."""
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(per_machine.ENV, raising=False)
    monkeypatch.setattr(mc._CONSTANTS, "get", lambda: mc.MachineConstants(copy_ns=COPY_NS))
    ww.forget()
    yield tmp_path / "kernels"
    ww.forget()  # the next test reads the suite's defaults again


def test_a_weight_is_the_chains_extra_time_per_call_over_the_copys() -> None:
    assert ww.derive(TIMINGS, COPY_NS) == MEASURED
    # a copy twice as slow halves every weight (the unit is the machine's copy)
    halved = ww.derive(TIMINGS, 2 * COPY_NS)
    assert [halved.of(n) for n in ww.MEASURED] == [1.0, 0.75, 0.3, 0.2, 0.1]


def test_minimum_shares_maximums_weight_and_the_rest_are_light() -> None:
    assert MEASURED.of("minimum") == MEASURED.of("maximum") == 0.2
    assert MEASURED.of("add") == MEASURED.of("remainder") == ww.LIGHT == 0.02


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"exp3_s": 1e-5}, "exp -0.2 out of [0.2, 16.0]"),  # the chain ran faster: disturbed
        ({"tanh3_s": 1e-2}, "tanh 199.6 out of [0.2, 16.0]"),
        ({"maximum3_s": 1e-5}, "maximum 0.0 out of [0.02, 4.0]"),
    ],
)
def test_each_weight_out_of_bounds_alone_keeps_its_default(change: dict, said: str) -> None:
    w = ww.derive({**TIMINGS, **change}, COPY_NS)
    (name,) = {key[:-3] for key in change}
    assert w.of(name) == ww.DEFAULTS.of(name) and said + ": default kept" in w.note
    assert w.note.startswith("measured; ")
    others = [n for n in ww.MEASURED if n != name]
    assert [w.of(n) for n in others] == [MEASURED.of(n) for n in others]


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.sampled_from(ww.FIELDS[1:]), st.floats(1e-7, 1e-1), min_size=1))
def test_any_timings_give_weights_in_bounds_or_the_default(change: dict) -> None:
    w = ww.derive({**TIMINGS, **change}, COPY_NS)
    for name in ww.MEASURED:
        low, high = ww.BOUNDS[name]
        assert low <= w.of(name) <= high or (
            w.of(name) == ww.DEFAULTS.of(name) and f"{name} " in w.note
        )


def test_the_defaults_are_the_development_machines_table() -> None:
    d = ww.DEFAULTS
    table = {"exp": 1.9, "tanh": 1.4, "sqrt": 0.62, "divide": 0.37, "maximum": 0.2}
    assert {n: d.of(n) for n in table} == table and d.of("minimum") == 0.2
    assert d.note == "defaults" and ww.LIGHT == 0.02
    assert ww.work_weights() == d  # the suite runs under DUALFLOW_MACHINE_CONSTANTS=defaults
    # the eager loops split as a fused kernel of one such step does under the default model
    assert float32_loops.part_min(("tanh",)) == int(mc.DEFAULTS.part_min / 1.4) == 1_497_965
    assert float32_loops.part_min(("exp",)) == int(mc.DEFAULTS.part_min / 1.9) == 1_103_764
    # a getter resolves its loops' part at its first call (fast_tanh's may have been built by
    # an earlier test under other constants: a getter of its own here)
    loops = float32_loops.lazy_loops(tanh_f32, f"k_tanh32_{fast_tanh.FINGERPRINT}", ("tanh",))
    assert loops().part_min == 1_497_965


def test_the_weights_are_measured_once_per_machine_and_read_back(weights_cache, monkeypatch):
    monkeypatch.setattr(ww, "measure", lambda: dict(TIMINGS))
    assert ww.work_weights() == MEASURED
    (entry,) = weights_cache.glob("work_weights_*.json")
    assert per_machine.machine_key(fast_tanh.FINGERPRINT, fast_exp.FINGERPRINT) in entry.name
    ww.forget()  # a new process on the same machine: no measurement

    def fail() -> dict:
        raise AssertionError("measured again although the cache holds the weights")

    monkeypatch.setattr(ww, "measure", fail)
    assert ww.work_weights() == MEASURED
    assert ww.DEFAULTS.describe().endswith("(defaults)")
    assert "exp 2, tanh 1.5, sqrt 0.6, divide 0.4, maximum/minimum 0.2" in MEASURED.describe()


def test_an_old_record_is_measured_again_once(weights_cache, monkeypatch) -> None:
    store = per_machine.open_store("kernels")
    name = ww._WEIGHTS.entry_name()
    old = {**TIMINGS, "copy_s": 1e-5}  # a record of other fields (an older probe's)
    store.save(name, json.dumps({"timings": old, "derived": {}}).encode())
    measured = []
    monkeypatch.setattr(ww, "measure", lambda: measured.append(1) or dict(TIMINGS))
    assert ww.work_weights() == MEASURED and measured == [1]
    record = json.loads(store.load(name))  # replaced by a record of today's fields
    assert set(record["timings"]) == set(ww.FIELDS) and record["derived"]["tanh"] == 1.5
    ww.forget()
    assert ww.work_weights() == MEASURED and measured == [1]


def test_the_fused_kernels_and_the_eager_loops_follow_the_weights(weights_cache, monkeypatch):
    monkeypatch.setattr(ww, "measure", lambda: dict(TIMINGS))
    tanh2 = lower_expr(("call", "tanh", ("call", "tanh", ("var", "a0"))), ("a0",), ("float32",))
    assert work_ratio(tanh2) == 3.0  # 2 x 1.5
    c = mc.MachineConstants(copy_ns=COPY_NS)
    assert float32_loops.part_min(("exp",)) == c.part_min_for(2.0) == c.part_min // 2
    sigmoid = ("multiply", "tanh", "multiply", "add")
    assert float32_loops.part_min(sigmoid) == c.part_min_for(1.5 + 3 * ww.LIGHT)


def test_the_probe_times_the_functions_the_fused_kernels_render() -> None:
    for name, text in ww.RENDERED.items():
        arity = 1 if name == "sqrt" else 2
        program = lower_expr(
            ("call", name, *[("var", f"a{k}") for k in range(arity)]),
            tuple(f"a{k}" for k in range(arity)),
            ("float32",) * arity,
        )
        assert FUNCTIONS[name].numba(["x", "y"][:arity], program.steps[0]) == text
        body = inspect.getsource(ww.BODIES[name][0].py_func)
        assert f"np.float32({text})" in body
    for name in ("tanh", "exp"):  # fast_math's own, as the table's rows import them
        assert FUNCTIONS[name].numba_import() in (fast_tanh.IMPORT, fast_exp.IMPORT)


@pytest.mark.parametrize("name", ww.MEASURED)
def test_the_probes_loops_compute_the_function_and_its_chain(name: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0.25, 1.0, 1000).astype(np.float32)
    y = rng.uniform(1.0, 2.0, 1000).astype(np.float32)
    c = np.float32(0.75)
    f = {
        "exp": lambda a, b: fast_exp.numpy_exp(a),
        "tanh": lambda a, b: fast_tanh.numpy_tanh(a),
        "sqrt": lambda a, b: np.sqrt(a),
        "divide": lambda a, b: np.divide(a, b, dtype=np.float32),
        "maximum": np.maximum,
    }[name]
    once, thrice = ww.loops(name)
    out = np.empty_like(x)
    once(x, y, c, out)
    assert out.tobytes() == f(x, y).tobytes()
    thrice(x, y, c, out)
    assert out.tobytes() == f(f(f(x, y), c), c).tobytes()


def test_a_real_probe_gives_a_record_the_reader_takes(weights_cache) -> None:
    timings = ww.measure()  # no bound on the values: only that they are a record's
    assert sorted(timings) == sorted(ww.FIELDS) and all(v > 0 for v in timings.values())
    assert isinstance(ww._read({"timings": timings}), ww.WorkWeights)
    assert ww._read({"timings": {**timings, "exp1_s": -1.0}}) is None

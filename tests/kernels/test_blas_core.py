"""kernels.base.blas_core: the table a probe's record picks (synthetic timings: nothing is timed
against a bound), records that are not a probe of this library's tables are measured again, and
a fresh process switches to the machine's choice at import, keeps a user's OPENBLAS_CORETYPE,
and computes a compiled training step bit for bit as eagerly under the chosen table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dualflow.background import blas_cores
from dualflow.disk_cache import open_store
from dualflow.kernels.base import blas_core, per_machine

LOADED = blas_cores.core_name()
OTHERS = [name for name in blas_cores.cores() if name != LOADED]
SHAPES = [list(s) for s in blas_core.SHAPES]
N = len(SHAPES)


def _record(seconds: dict) -> dict:
    return {"loaded": LOADED, "shapes": SHAPES, "seconds": seconds}


@given(st.lists(st.floats(0.5, 1.5), min_size=N, max_size=N))
def test_another_table_is_chosen_only_when_faster_by_the_margin(ratios) -> None:
    seconds = {"A": [1e-3] * N, "B": [r * 1e-3 for r in ratios]}
    chosen = blas_core.choose({"loaded": "A", "seconds": seconds})
    mean = sum(ratios) / N
    assert chosen.core == ("B" if mean <= 1 - blas_core.MIN_GAIN else "A")
    assert chosen.loaded == "A" and (chosen.ratio == pytest.approx(mean) or chosen.core == "A")


@pytest.mark.skipif(not OTHERS, reason="one OpenBLAS table here")
def test_a_record_that_is_no_probe_of_these_tables_is_measured_again() -> None:
    good = {name: [1e-3] * N for name in blas_cores.cores()}
    good[OTHERS[0]] = [5e-4] * N
    assert blas_core._read(_record(good)).core == OTHERS[0]
    tampered = {**good, "Bogus": [1e-4] * N}  # a table this library or CPU cannot run
    wrong_shapes = {**_record(good), "shapes": SHAPES[:3]}
    not_loaded = {**_record(good), "loaded": OTHERS[0]}  # a probe made under another pick
    for bad in (
        _record(tampered),
        _record({**good, LOADED: [1e-3] * (N - 1) + [-1.0]}),
        _record({**good, LOADED: [1e-3] * (N - 1)}),
        _record({**good, LOADED: ["1e-3"] * N}),
        wrong_shapes,
        not_loaded,
        [],
    ):
        assert blas_core._read(bad) is None


def _save(cache, record: dict) -> None:
    with pytest.MonkeyPatch.context() as mp:  # the signed store of the child's cache folder
        mp.setenv("DUALFLOW_CACHE_DIR", str(cache))
        open_store("kernels").save(blas_core._CHOICE.entry_name(), json.dumps(record).encode())


def _load(cache) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DUALFLOW_CACHE_DIR", str(cache))
        return open_store("kernels").load(blas_core._CHOICE.entry_name()).decode()


def _fresh(code: str, cache: str, **env: str) -> str:
    full = {**os.environ, "DUALFLOW_CACHE_DIR": cache, per_machine.ENV: "measured", **env}
    if "OPENBLAS_CORETYPE" not in env:
        full.pop("OPENBLAS_CORETYPE", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


STEP = """
import numpy as np, dualflow
from dualflow import nn, optim
from dualflow.background import blas_cores
def run(compiled):
    dualflow.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 10))
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = dualflow.tensor(np.random.default_rng(1).standard_normal((32, 64), dtype=np.float32))
    y = dualflow.tensor(np.arange(32) % 10)
    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    step = dualflow.compile(step) if compiled else step
    losses = [float(step()) for _ in range(4)]
    return losses, [p.detach().numpy().copy() for p in model.parameters()]
(el, ep), (cl, cp) = run(False), run(True)
same = el == cl and all((a == b).all() for a, b in zip(ep, cp))
print(blas_cores.core_name(), same)
"""


@pytest.mark.skipif(not OTHERS, reason="one OpenBLAS table here")
def test_a_fresh_process_runs_the_recorded_choice_and_compiled_equals_eager(tmp_path) -> None:
    seconds = {name: [1e-3] * N for name in blas_cores.cores()}
    seconds[OTHERS[0]] = [5e-4] * N  # the record says the other table is twice as fast
    _save(tmp_path, _record(seconds))
    assert _fresh(STEP, str(tmp_path)) == f"{OTHERS[0]} True"
    # the user's own choice stands, whatever the machine's record says
    assert _fresh(STEP, str(tmp_path), OPENBLAS_CORETYPE=LOADED) == f"{LOADED} True"


@pytest.mark.skipif(not OTHERS, reason="one OpenBLAS table here")
def test_a_tampered_record_is_measured_again_and_a_thread_keeps_the_table(tmp_path) -> None:
    bogus = {n: [1e-3] * N for n in blas_cores.cores()} | {"Bogus": [1e-9] * N}
    _save(tmp_path, _record(bogus))
    code = (
        "import dualflow; from dualflow.background import blas_cores; print(blas_cores.core_name())"
    )
    assert _fresh(code, str(tmp_path)) in blas_cores.cores()  # measured: one it can run
    assert "Bogus" not in _load(tmp_path)  # replaced by the new measurement
    # a thread that may be in a BLAS call when dualflow is imported: nothing is switched
    seconds = {n: [1e-3] * N for n in blas_cores.cores()} | {OTHERS[0]: [5e-4] * N}
    _save(tmp_path, _record(seconds))
    busy = (
        "import threading, numpy as np; e = threading.Event(); "
        "t = threading.Thread(target=e.wait); t.start(); " + code[:-1] + ", flush=True); e.set()"
    )
    assert _fresh(busy, str(tmp_path)) == LOADED


@pytest.mark.skipif(not OTHERS, reason="one OpenBLAS table here")
def test_no_shared_record_or_a_bad_setting_keeps_the_table_and_the_import_works(tmp_path) -> None:
    seconds = {n: [1e-3] * N for n in blas_cores.cores()} | {OTHERS[0]: [5e-4] * N}
    _save(tmp_path, _record(seconds))  # a record that would switch
    code = (
        "import dualflow; from dualflow.background import blas_cores; print(blas_cores.core_name())"
    )
    # a bad limit is the cache's error at its first use, never ``import dualflow``'s
    assert _fresh(code, str(tmp_path), DUALFLOW_CACHE_MAX_MB="lots") == LOADED
    assert _fresh(code, str(tmp_path), **{per_machine.ENV: "sometimes"}) == LOADED
    # an untrusted cache (others may write it): no shared record, so no per-process choice
    shared = tmp_path / "shared"
    shared.mkdir()
    _save(shared, _record(seconds))
    shared.chmod(0o777)
    try:
        assert _fresh(code, str(shared)) == LOADED
    finally:
        shared.chmod(0o700)
    assert _fresh(code, str(tmp_path)) == OTHERS[0]  # the control: the record is switched to

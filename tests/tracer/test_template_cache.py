"""Templates in the plan cache (issue 39, ``symir``): a witnessed template is stored with its
facts as symbolic IR text; a new compiled function (or process) with the same cache, called at
sizes the template covers, builds its plan from it without tracing, bit-identical to eager; a
template whose witness does not check out again loads as not witnessed; damaged facts mean a
trace, never an error."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.disk_cache import open_store
from dualflow.tracer import template_cache


def _make(cache: Any, compiled: bool = True, dynamic: bool | None = None) -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    for p in model.params():
        p.array[...] = rng.normal(size=p.shape).astype(np.float32) * 0.3
    opt = optim.SGD(model.params(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if not compiled:
        return step, model
    return dualflow.compile(step, cache_dir=cache, dynamic=dynamic, passes="exact"), model


def _batch(n: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(n)
    x = dualflow.tensor(rng.normal(size=(n, 6)).astype(np.float32))
    return x, dualflow.tensor(rng.integers(0, 3, n))


def _losses(step: Any, sizes: list[int]) -> list[float]:
    return [step(*_batch(n)).item() for n in sizes]


def _first_process(cache: Path, dynamic: bool | None = None) -> Any:
    first, _ = _make(cache, dynamic=dynamic)
    _losses(first, [8, 12, 16])  # a static trace, then a template it witnesses
    assert first.stats().traces == 2
    return first


def _template_entries(cache: Path) -> list[dict]:
    found = []
    for meta_file in cache.glob("*/*/meta.json"):
        meta = json.loads(meta_file.read_bytes().split(b"\n", 1)[1])
        if "template" in meta:
            found.append(meta["template"])
    return found


@pytest.mark.parametrize("dynamic", [None, True])
def test_a_new_function_serves_new_sizes_from_the_stored_template(
    tmp_path: Path, dynamic: bool | None
) -> None:
    _first_process(tmp_path, dynamic)
    records = _template_entries(tmp_path)
    assert len(records) == (1 if dynamic is None else 2)  # True: both templates witnessed
    record = records[0]
    assert record["witness"]["binding"] and "symbols s0 = arg0[0]" in record["graphs"][0]
    second, model = _make(tmp_path, dynamic=dynamic)  # a fresh process's view: nothing in memory
    sizes = [20, 5, 33, 20]
    losses = _losses(second, sizes)
    assert second.stats().traces == 0, [t.reason for t in second.history]
    assert second.stats().plan_runs == len(sizes)
    eager, eager_model = _make(None, compiled=False)
    assert losses == _losses(eager, sizes)  # bit for bit (passes="exact")
    for got, want in zip(model.params(), eager_model.params()):
        assert np.array_equal(got.array, want.array)
    assert "witnessed: serves every size" in str(dualflow.explain(second))


def test_batch_one_is_served_where_the_loaded_guards_hold(tmp_path: Path) -> None:
    _first_process(tmp_path)
    second, _ = _make(tmp_path)
    want = _losses(_make(None, compiled=False)[0], [1, 7])
    # nothing the trace decided goes otherwise at one row: its guards (stored with it) admit 1
    assert _losses(second, [1, 7]) == want
    assert second.stats().traces == 0


def _rewrite_template(cache: Path, change: Any) -> None:
    store = open_store("plans", cache)
    for meta_file in cache.glob("*/*/meta.json"):
        name = str(meta_file.relative_to(store.directory))
        meta = json.loads(store.load(name, 2**26))
        if "template" in meta:
            change(meta["template"])
            meta_file.write_bytes(store.signed(name, json.dumps(meta).encode()))


def test_a_witness_that_does_not_check_out_loads_as_not_witnessed(tmp_path: Path) -> None:
    _first_process(tmp_path)
    _rewrite_template(tmp_path, lambda t: t["witness"].update(digest="0" * 64))
    second, _ = _make(tmp_path)
    _losses(second, [20])
    assert second.stats().traces == 1  # not witnessed: the call traces
    family = next(iter(second.dynamic.families.values()))
    assert [t.witnessed for t in family.templates][-1] is False


@pytest.mark.parametrize(
    "damage",
    [
        lambda t: t.update(graphs=[g.replace("s0", "s9", 1) for g in t["graphs"]]),
        lambda t: t.update(graphs=[g.replace("[s0,6]", "[s0*2,6]") for g in t["graphs"]]),
        lambda t: t.update(mask=[[0, [1]]]),
        lambda t: t.update(consts=[{"1": {"tuple": [1]}} for _ in t["consts"]]),
    ],
)
def test_damaged_template_facts_mean_a_trace(tmp_path: Path, damage: Any) -> None:
    _first_process(tmp_path)
    _rewrite_template(tmp_path, damage)
    second, _ = _make(tmp_path)
    want = _losses(_make(None, compiled=False)[0], [20])
    assert _losses(second, [20]) == want
    assert second.stats().traces == 1


def test_the_structure_key_ignores_sizes_only() -> None:
    first, _ = _make(None)
    flats = []
    for n in (8, 12):
        from dualflow.tracer.signature import flatten

        flats.append(flatten(_batch(n), {}, ["x", "y"]))
    assert template_cache.structure_key(first, flats[0]) == template_cache.structure_key(
        first, flats[1]
    )


_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[3])
from tests.tracer.test_template_cache import _losses, _make
step, _ = _make(sys.argv[1])
losses = _losses(step, json.loads(sys.argv[2]))
print(json.dumps({"losses": losses, "traces": step.stats().traces}))
"""


def test_a_second_process_builds_plans_from_the_stored_template(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    script = tmp_path / "step.py"
    script.write_text(_SCRIPT)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "DUALFLOW_CACHE_DIR": str(tmp_path / "kernels")}

    def run(sizes: list[int]) -> dict[str, Any]:
        command = [sys.executable, str(script), str(tmp_path / "plans"), json.dumps(sizes), root]
        out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    first, second = run([8, 12, 16]), run([20, 5, 33])
    assert (first["traces"], second["traces"]) == (2, 0)
    assert second["losses"] == _losses(_make(None, compiled=False)[0], [20, 5, 33])


def test_the_storing_function_does_not_load_its_own_templates_again(tmp_path: Path) -> None:
    first = _first_process(tmp_path)
    with np.errstate(all="ignore"), warnings.catch_warnings():  # the mean of no rows
        warnings.simplefilter("ignore")
        _losses(first, [0])  # a miss (an empty batch is never a symbol): traced, after looking
    assert first.stats().traces == 3
    (family,) = first.dynamic.families.values()
    assert len(family.templates) == 1

"""The per-example-grads workload: vmap(grad) equals a loop of per-example dualflow.grad calls,
and the bench runs it in every mode with compiled results matching eager."""

from __future__ import annotations

import json

import numpy as np

import dualflow
from dualflow.bench.cli import main
from dualflow.bench.func_workloads import _example_loss, build_per_example_grads
from dualflow.bench.modes import MODES


def test_per_example_grads_equal_a_loop() -> None:
    built = build_per_example_grads(np.random.default_rng(0), batch=4)
    grads = built["step"]()
    x, labels = built["inputs"]
    leaves = [p.detach().requires_grad_(True) for p in built["params"]]
    for b in range(4):
        want = dualflow.grad(_example_loss(leaves, x[b], labels[b]), leaves)
        for g, w in zip(grads, want):  # float32; the batched GEMMs sum in another order
            np.testing.assert_allclose(g[b].numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


def test_bench_runs_it_in_every_mode(tmp_path) -> None:
    args = ["--workloads", "per-example-grads", "--repeats", "2", "--no-chart"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    rows = {r["mode"]: r for r in json.loads((tmp_path / "bench.json").read_text())["results"]}
    assert set(rows) == set(MODES)
    assert rows["eager"]["baseline_ms"] > 0  # the Python loop
    for mode in MODES[1:]:
        assert rows[mode]["matches"] is True, rows[mode]

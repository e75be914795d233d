"""The bench's workload set: CI smoke run, gradient penalty, aliases, defaults, ResNets, devices."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields

import numpy as np
import pytest

from dualflow.__main__ import main as dualflow_main
from dualflow.bench.cli import main, run
from dualflow.bench.harness import Measurement
from dualflow.bench.modes import MODES, final_state, max_difference, prepare
from dualflow.bench.vision_workloads import build_resnet18, build_resnet50
from dualflow.bench.workloads import (
    GPU_SCALE,
    WORKLOADS,
    Workload,
    default_workloads,
    resolve_names,
)
from dualflow.device import Device


def _rows(path) -> dict[tuple[str, str], dict]:
    return {(r["workload"], r["mode"]): r for r in json.loads(path.read_text())["results"]}


def _gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no cupy, or cupy without a driver/GPU
        return False


def test_ci_smoke_run_schema_modes_and_match(tmp_path) -> None:
    args = ["bench", "--quick", "--workloads", "tiny-ops,mlp", "--repeats", "2", "--no-chart"]
    assert dualflow_main([*args, "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "bench.json").read_text())
    assert {"python", "numpy", "machine", "cpus", "device"} <= set(data["meta"])
    assert data["meta"]["gemm_gflops"] > 0 and data["meta"]["bandwidth_gbps"] > 0
    assert data["meta"]["device"].startswith("cpu")
    assert data["meta"]["machine_constants"]["note"] == "defaults"  # tests/conftest.py fixes them
    assert (
        data["meta"]["work_weights"]["tanh"] == 1.4 and data["meta"]["pool_work"]["copies"] == 1.5
    )
    schema = {f.name for f in fields(Measurement)}
    assert all(set(r) == schema for r in data["results"])
    rows = _rows(tmp_path / "bench.json")
    assert set(rows) == {(w, m) for w in ("tiny-ops", "mlp") for m in MODES}
    for (_, mode), row in rows.items():
        assert row["repeats"] == 2 and row["ms_min"] <= row["ms_median"] <= row["ms_max"]
        assert row["steps"] > 0  # eager counts its ops, compiled modes their plan steps
        if row["workload"] == "mlp":  # its GEMMs' FLOPs, counted from the plan, for every mode
            assert row["gflops"] > 0 and row["gemm_share"] > 0
            # the plans' matmuls alone in numpy over inside the plan (lazy: no plan of its own)
            plans = mode in ("compiled", "compiled-O0")
            assert (row["gemm_alone"] > 0) if plans else row["gemm_alone"] is None
        if mode != "eager":
            assert row["matches"] is True and row["max_rel_diff"] <= 1e-5
            assert row["compile_ms"] > 0 and row["mem_ratio"] > 0
            assert row["speedup"] > 0 if not row["noisy"] else row["speedup"] is None


def test_gradient_penalty_runs_in_every_mode_and_matches_eager(tmp_path, capsys) -> None:
    args = ["--workloads", "gradient-penalty", "--repeats", "2", "--no-chart"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    rows = _rows(tmp_path / "bench.json")
    assert [m for (_, m) in rows] == list(MODES)
    eager = rows[("gradient-penalty", "eager")]
    assert eager["peak_bytes"] > 64 * 256 * 4  # at least one hidden activation
    for mode in MODES[1:]:
        row = rows[("gradient-penalty", mode)]
        assert row["matches"] is True and row["max_diff"] < 1e-5, row
        assert row["steps"] > 0 and row["compile_ms"] > 0
    assert "gradient-penalty" in capsys.readouterr().out


def test_inference_mlp_is_an_alias_of_inference(tmp_path) -> None:
    assert resolve_names("inference-mlp,mlp,inference") == (["inference", "mlp"], [])
    args = ["--workloads", "inference-mlp", "--repeats", "2", "--no-chart"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    assert {w for (w, _) in _rows(tmp_path / "bench.json")} == {"inference"}
    assert "inference-mlp" not in WORKLOADS


@pytest.mark.skipif(_gpu_available(), reason="cupy with a GPU is available here")
def test_cuda_device_without_a_gpu_exits_2_with_one_line(tmp_path) -> None:
    command = [sys.executable, "-m", "dualflow.bench", "--device", "cuda:0", "--out", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("dualflow bench: device cuda:0") and ("cupy" in line), line
    assert not (tmp_path / "bench.json").exists()


def test_unknown_device_is_rejected(capsys) -> None:
    assert main(["--device", "tpu:0", "--no-chart"]) == 2
    assert "unknown device" in capsys.readouterr().err


def test_default_set_excludes_gpu_scale_workloads_on_cpu() -> None:
    gpu_scale = {n for n, w in WORKLOADS.items() if GPU_SCALE in w.tags}
    assert gpu_scale == {"elementwise-64m", "resnet50"}
    cpu = default_workloads()
    assert not gpu_scale & set(cpu)
    wanted = ["tiny-ops", "mlp", "cnn", "resnet18", "gradient-penalty", "elementwise"]
    assert set(wanted + ["inference", "distributed"]) <= set(cpu)
    assert set(default_workloads(Device("cuda:0"))) == set(WORKLOADS)


def test_distributed_is_a_note_row_on_a_gpu() -> None:
    (row,) = run(["distributed"], 1.0, 0, repeats=3, device=Device("cuda:0"))
    assert row.repeats == 0 and row.note.startswith("skipped on cuda:0")


@pytest.mark.parametrize(
    ("build", "kwargs"),
    [
        (build_resnet18, {"batch": 2, "width": 0.125}),
        (build_resnet50, {"batch": 2, "size": 32, "width": 0.125}),
    ],
)
def test_narrow_resnets_compile_and_match_eager(build, kwargs) -> None:
    states = []
    for mode in ("eager", "compiled"):
        built = build(np.random.default_rng(0), **kwargs)
        step = prepare(mode, built["step"])
        for _ in range(3):  # trace, retrace once the momentum buffers exist, then the plan
            out = step()
        states.append(final_state(built, out))
    assert len(states[0]) == len(built["params"]) + 1
    assert max_difference(*states) < 1e-5


def test_resnets_and_gpu_workloads_are_registered() -> None:
    assert WORKLOADS["resnet18"].build is build_resnet18
    assert WORKLOADS["resnet50"].build is build_resnet50
    # ~1 s a step: a handful of repeats keeps `--quick` under its 2-minute budget (34 s in all)
    assert WORKLOADS["resnet18"].quick_repeats <= 5 and WORKLOADS["resnet18"].warmup >= 2


def test_elementwise_rows_report_bandwidth(tmp_path, capsys) -> None:
    args = ["--workloads", "elementwise", "--repeats", "2", "--no-chart"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    rows = _rows(tmp_path / "bench.json")
    assert all(r["gbps"] > 0 and r["baseline_ms"] > 0 for r in rows.values())
    assert all(r["bandwidth_share"] > 0 and r["gflops"] is None for r in rows.values())
    out = capsys.readouterr().out.splitlines()
    assert "GB/s" in out[0] and "% BW" in out[0] and "GFLOP/s" not in out[0]
    assert any(line.startswith("machine: float32 GEMM") for line in out)
    # the constants the passes and kernels decided by: the suite's fixed defaults
    assert "machine constants: balance 6 FLOP/byte, part_min 2097152 elements, " in "\n".join(out)
    assert "work weights (copies an element): exp 1.9, tanh 1.4, " in "\n".join(out)
    assert "pool work: 2x2 max pool 1.5 copies an image element (defaults)" in "\n".join(out)


@pytest.mark.slow
def test_full_width_resnet18_runs_and_matches(tmp_path) -> None:
    args = ["--workloads", "resnet18", "--repeats", "1", "--no-chart"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    rows = _rows(tmp_path / "bench.json")
    assert [m for (_, m) in rows] == list(MODES)
    assert all(r["matches"] for (_, m), r in rows.items() if m != "eager")


def test_a_failing_cell_is_a_note_row_and_exit_status_1(tmp_path, monkeypatch, capsys) -> None:
    def build_broken(rng, device):
        raise RuntimeError("no such kernel\nsecond line")

    monkeypatch.setitem(WORKLOADS, "broken", Workload("broken", "always fails", build_broken, 3))
    args = ["--workloads", "broken,tiny-ops", "--repeats", "2", "--no-chart"]
    assert main([*args, "--out", str(tmp_path)]) == 1
    rows = _rows(tmp_path / "bench.json")
    broken = [r for (w, _), r in rows.items() if w == "broken"]
    assert len(broken) == len(MODES)
    assert all(r["note"] == "failed: RuntimeError: no such kernel" for r in broken)
    assert all(rows[("tiny-ops", m)]["repeats"] == 2 for m in MODES)
    assert "failed: broken eager" in capsys.readouterr().err


def test_sum_of_squares_compiles_to_one_fused_sum_without_temporaries(tmp_path) -> None:
    args = ["--workloads", "sum-of-squares", "--repeats", "2", "--no-chart"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    rows = _rows(tmp_path / "bench.json")
    eager, compiled = rows[("sum-of-squares", "eager")], rows[("sum-of-squares", "compiled")]
    assert eager["steps"] == 3 and compiled["steps"] == 1  # subtract, power, sum -> one kernel
    assert compiled["matches"] is True and compiled["max_rel_diff"] <= 1e-5
    assert compiled["peak_bytes"] < eager["peak_bytes"] // 4  # no 16 MiB temporaries
    assert "sum-of-squares" in default_workloads()

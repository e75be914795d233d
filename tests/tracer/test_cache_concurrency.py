"""Caches under concurrent use: deleting them while a run uses them is not an error, and several
processes filling one cache at once all compute correct results (and a later one loads it all)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow.kernels.fused_cpu import fused_elementwise as kc
from dualflow.kernels.numba import numba_elementwise
from dualflow.runtime import bytecode_cache


def step(x):
    return (x * 0.5 + 1.0) * x - 2.0  # one arithmetic fused kernel (numba from 4096 elements)


def want(x: np.ndarray) -> list[float]:
    return ((x * 0.5 + 1.0) * x - 2.0).tolist()


def test_deleting_the_caches_during_use_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, plans = tmp_path / "cache", tmp_path / "plans"
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(root))
    stop = threading.Event()

    def delete() -> None:
        while not stop.is_set():
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(plans, ignore_errors=True)
            time.sleep(0.002)

    deleter = threading.Thread(target=delete)
    deleter.start()
    try:
        for n in range(4096, 4102):
            # forget in-memory kernels: every round reads and writes the disk caches
            monkeypatch.setattr(numba_elementwise, "_MODULES", OrderedDict())
            monkeypatch.setattr(kc, "_CACHE", {})
            x = np.arange(float(n))
            compiled = dualflow.compile(step, cache_dir=plans)
            for _ in range(2):  # traced (and stored), then run
                assert compiled(dualflow.tensor(x)).tolist() == want(x)
            source = "def run(x):\n" + "    x = x + 1\n" * (n - 3696) + "    return x\n"
            namespace: dict = {}
            exec(bytecode_cache.compile_plan(source, "<p>"), namespace)
            assert namespace["run"](0) == n - 3696
    finally:
        stop.set()
        deleter.join()


_WORKER = """
import json, sys
import numpy as np
import dualflow

def step(x):
    return (x * 0.5 + 1.0) * x - 2.0

compiled = dualflow.compile(step, cache_dir=sys.argv[1])
results = [compiled(dualflow.tensor(np.arange(n + 0.0))).tolist() for n in (5000, 5000, 5001, 5001)]
from dualflow.kernels.numba import numba_elementwise
hits = sum(sum(m.kernel.stats.cache_hits.values()) for m in numba_elementwise._MODULES.values())
print(json.dumps({"results": results, "loads": compiled.stats().cache_loads, "hits": hits}))
"""


def test_processes_filling_one_cache_at_once_agree(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(_WORKER))
    env = {**os.environ, "DUALFLOW_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, str(script), str(tmp_path / "plans")]
    workers = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    expected = [want(np.arange(float(n))) for n in (5000, 5000, 5001, 5001)]
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err.decode()
        assert json.loads(out)["results"] == expected
    late = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    report = json.loads(late.stdout)
    assert report["results"] == expected
    assert report["loads"] == 2 and report["hits"] >= 1  # plans and machine code from disk
    assert "ignoring cache entry" not in late.stderr

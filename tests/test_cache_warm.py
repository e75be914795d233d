"""``cache_warm.py``: ``warm`` builds every fixed CPU kernel (a kernel added without a warm
route fails here), and ``dualflow cache warm`` runs it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dualflow import cache_cli
from dualflow import cache_warm as warm
from dualflow.kernels.conv import column_copies
from dualflow.kernels.fused_cpu import fused_elementwise
from dualflow.kernels.loss import cross_entropy
from dualflow.kernels.norm import batch_norm
from dualflow.kernels.numba import compile_worker
from dualflow.kernels.pool import pool_kernels
from dualflow.kernels.pool.pool_loops import BODIES
from dualflow.ops.registry import OPS

KERNELS = Path(column_copies.__file__).parent


def _named_kernels() -> set[str]:
    """Every fixed numba kernel name the package builds through ``numba_kernel``."""
    names = set()
    for path in KERNELS.glob("*.py"):
        names.update(re.findall(r'(?:numba_kernel|_by_filters)\("(\w+)"', path.read_text()))
        if re.search(r'numba_kernel\(f"winograd\{name\}', path.read_text()):
            loops = re.findall(r'_in_parts\("(\w+)"', path.read_text())
            names.update(f"winograd{loop}" for loop in loops)
    return names - {"doc_twice"}  # a docstring's example


def test_warm_builds_every_fixed_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    # empty in-process tables: whatever warm does not reach is missing from them afterwards
    monkeypatch.setattr(column_copies, "_KERNELS", {})
    monkeypatch.setattr(pool_kernels, "_KERNELS", {})
    monkeypatch.setattr(fused_elementwise, "_CACHE", {})
    monkeypatch.setattr(cross_entropy, "_KERNELS", {})
    monkeypatch.setattr(batch_norm, "_KERNELS", {})
    warm.warm()
    built = {re.sub(r"[0-9a-f]{16}$", "", name) for name in column_copies._KERNELS}
    assert _named_kernels() <= built, _named_kernels() - built
    assert {"winograd_input_tiles", "winograd_output_tiles", "winograd_gradient_tiles"} <= built
    pools = set(pool_kernels._KERNELS)
    for body in BODIES:  # every body generic, and fixed for 2x2/2 or 3x3/2 (overlapping)
        assert (body, None) in pools
        fixed = (3, 3, 2, 2) if body == "maxpoolrows" else (2, 2, 2, 2)
        assert (body, fixed) in pools
    # relu's eager kernels, forward and gradient, as one flat (1-D) signature per dtype
    eager = {(key[0], key[2], len(key[3][0])) for key in fused_elementwise._CACHE}
    for dtype in warm.DTYPES:
        for name, count in (("relu", 1), ("relu_grad", 2)):
            assert (OPS[name].expr, (dtype,) * count, 1) in eager, (name, dtype)
    # softmax cross entropy's loss, gradient and both at once: one signature each, per dtype
    for kernel in cross_entropy._KERNELS.values():
        assert len(kernel.signatures) == 1
    # batch norm's forward, one signature per dtype
    assert {str(d) for d in batch_norm._KERNELS} == set(warm.DTYPES)
    assert all(len(k.signatures) == 1 for k in batch_norm._KERNELS.values())
    assert {(kind, str(dtype)) for kind, dtype in cross_entropy._KERNELS} == {
        (kind, dtype) for kind in ("loss", "grad", "both") for dtype in warm.DTYPES
    }


def test_cache_warm_command_lists_each_route(capsys: pytest.CaptureFixture) -> None:
    assert cache_cli.main(["warm"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.strip() for line in out[:-1]] == [name for name, _ in warm.routes()]
    assert out[-1].startswith(f"warmed {len(warm.routes())} kernel routes in ")


def test_warm_compiles_in_its_own_process_with_the_worker_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # filling the store is warm's job: no kernel may be left to a worker (or to blocked stand-ins)
    monkeypatch.setattr(compile_worker, "_enabled", True)
    seen: list[bool] = []
    probe = ("probe", lambda: seen.append(compile_worker.active()))
    monkeypatch.setattr(warm, "routes", lambda: [probe])
    assert warm.warm() == ["probe"]
    assert seen == [False] and compile_worker.active()

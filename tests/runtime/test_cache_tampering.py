"""The runtime's disk caches played as an attacker would: code appended to a kernel source, a
flipped operator, pickles planted for numba, machine code or bytecode replaced or swapped, crafted
names for the generated executor. Each must end in "entry ignored, result correct, nothing
executed" (a payload would write the ``marker`` file)."""

from __future__ import annotations

import marshal
import os
import pickle
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from dualflow.disk_trust import sign
from dualflow.errors import CompileError
from dualflow.graph_ir import GraphBuilder
from dualflow.graph_ir.verify import GraphVerifyError, verify
from dualflow.kernels.base.lru_dict import Recent
from dualflow.kernels.expr.expression import render_numpy
from dualflow.kernels.expr.typed_program import lower_expr
from dualflow.kernels.fused_cpu import fused_elementwise as kc
from dualflow.kernels.numba import numba_elementwise
from dualflow.runtime import bytecode_cache, lower
from dualflow.runtime.codegen import render

AXPY = ("call", "add", ("call", "multiply", ("var", "a0"), ("const", 0.5)), ("var", "a1"))
AXMY = ("call", "subtract", ("call", "multiply", ("var", "a0"), ("const", 0.5)), ("var", "a1"))
X, Y = np.arange(16.0), np.full(16, 3.0)


class Payload:
    """Unpickling (or exec'ing the code of) this writes the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path / "cache"))
    fresh(monkeypatch)
    return tmp_path / "cache"


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "payload-ran"


def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget in-memory kernels, as a new process would: the next use reads the disk cache."""
    monkeypatch.setattr(numba_elementwise, "_MODULES", OrderedDict())
    monkeypatch.setattr(kc, "_CACHE", {})


def run(expr: tuple = AXPY) -> np.ndarray:
    return kc.cpu_kernel(expr, ("a0", "a1"), (((16,), "float64"), ((16,), "float64")))(np, X, Y)


def kernel_stats() -> tuple[int, int]:
    (module,) = numba_elementwise._MODULES.values()
    stats = module.kernel.stats
    return sum(stats.cache_hits.values()), sum(stats.cache_misses.values())


def test_code_appended_to_a_kernel_source_never_runs(
    cache: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    np.testing.assert_array_equal(run(), X * 0.5 + Y)
    (source,) = (cache / "kernels").glob("k_*.py")
    source.write_text(source.read_text() + f"open({str(marker)!r}, 'w').write('ran')\n")
    fresh(monkeypatch)
    with pytest.warns(RuntimeWarning, match="ignoring cache entry .*k_.*signature"):
        np.testing.assert_array_equal(run(), X * 0.5 + Y)
    assert not marker.exists()
    assert "open(" not in source.read_text()  # ignored and rewritten


def test_flipped_operator_in_a_kernel_source_changes_nothing(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run()
    (source,) = (cache / "kernels").glob("k_*.py")
    source.write_text(source.read_text().replace(" + ", " - "))
    fresh(monkeypatch)
    with pytest.warns(RuntimeWarning, match="ignoring cache entry"):
        np.testing.assert_array_equal(run(), X * 0.5 + Y)
    assert " + " in source.read_text()


def test_pickles_planted_for_numba_are_never_unpickled(
    cache: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run()
    assert kernel_stats() == (0, 1)  # compiled, then stored
    pycache = cache / "kernels" / "__pycache__"
    (machine_code,) = pycache.glob("k_*.nbc")
    stem = machine_code.name.split(".")[0]
    planted = pickle.dumps(Payload(marker))
    # numba's own index name for this kernel: numba's cache is not used, so never opened
    for line in range(1, 30):
        (pycache / f"{stem}.kernel-{line}.py311.nbi").write_bytes(planted)
    machine_code.write_bytes(
        sign(os.urandom(32), f"kernels/__pycache__/{machine_code.name}", planted)
    )
    fresh(monkeypatch)
    with pytest.warns(RuntimeWarning, match="signature does not match"):
        np.testing.assert_array_equal(run(), X * 0.5 + Y)
    assert not marker.exists()
    assert kernel_stats() == (0, 1)  # compiled again, and the entry rewritten:
    fresh(monkeypatch)
    np.testing.assert_array_equal(run(), X * 0.5 + Y)
    assert kernel_stats() == (1, 0)


def test_machine_code_swapped_between_kernels_is_refused(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(AXPY)
    first = set((cache / "kernels" / "__pycache__").glob("*.nbc"))
    run(AXMY)
    (other,) = set((cache / "kernels" / "__pycache__").glob("*.nbc")) - first
    (axpy,) = first
    other.write_bytes(axpy.read_bytes())  # validly signed, but for another entry's name
    fresh(monkeypatch)
    with pytest.warns(RuntimeWarning, match="signature does not match"):
        np.testing.assert_array_equal(run(AXMY), X * 0.5 - Y)


def _big_source(n: int = 400) -> str:
    body = "".join(f"    v{i} = x + {i}\n" for i in range(n))
    return f"def run(x):\n{body}    return v{n - 1}\n"


def _call(code: object) -> int:
    namespace: dict = {}
    exec(code, namespace)
    return namespace["run"](1)


def test_replaced_bytecode_never_runs(cache: Path, marker: Path) -> None:
    source = _big_source()
    assert _call(bytecode_cache.compile_plan(source, "<plan t>")) == 400
    (path,) = (cache / "bytecode").glob("*.marshal")
    # stealthy: the planted code also returns the right result
    evil = compile(source + f"open({str(marker)!r}, 'w').write('ran')\n", "<plan t>", "exec")
    forged = sign(os.urandom(32), f"bytecode/{path.name}", marshal.dumps(evil))
    for k, data in enumerate((marshal.dumps(evil), forged, path.read_bytes()[:100])):
        path.write_bytes(data)  # unsigned, signed with another key, truncated
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert _call(bytecode_cache.compile_plan(source, "<plan t>")) == 400
        assert not marker.exists()
        assert ("ignoring cache entry" in str(caught[0].message)) if k == 0 else not caught
        assert path.read_bytes() != data  # rewritten (one warning per entry and process)


def test_bytecode_swapped_between_plans_is_refused(cache: Path) -> None:
    a, b = _big_source(400), _big_source(401)
    bytecode_cache.compile_plan(a, "<plan s>")
    (path_a,) = (cache / "bytecode").glob("*.marshal")
    bytecode_cache.compile_plan(b, "<plan s>")
    (path_b,) = set((cache / "bytecode").glob("*.marshal")) - {path_a}
    path_b.write_bytes(path_a.read_bytes())
    with pytest.warns(RuntimeWarning, match="signature does not match"):
        assert _call(bytecode_cache.compile_plan(b, "<plan s>")) == 401


def _sum_graph():
    b = GraphBuilder("f")
    x = b.input((3,), "float64", "x")
    b.output(*b.node("sum", [x], {"axis": None, "keepdims": False}))
    return b.build()


def test_crafted_attribute_key_is_never_written_into_code(marker: Path) -> None:
    graph = _sum_graph()
    evil = f"keepdims=False, axis=open({str(marker)!r}, 'w').write('ran') and None"
    graph.nodes[0].attrs[evil] = 0
    with pytest.raises(GraphVerifyError, match="is not plain data"):
        verify(graph)
    with pytest.raises(CompileError, match="not a plain identifier"):
        lower(graph)  # even unverified, codegen refuses the name
    with pytest.raises(CompileError, match="not a plain identifier"):
        render(graph, {"guard": None})
    assert not marker.exists()


def test_crafted_values_are_never_written_into_code(marker: Path) -> None:
    graph = _sum_graph()
    payload = f"open({str(marker)!r}, 'w').write('ran')"
    object.__setattr__(graph.nodes[0].outputs[0], "id", f"1 or {payload}")
    with pytest.raises(CompileError, match="non-negative int"):
        lower(graph)
    graph = _sum_graph()
    graph.nodes[0].attrs["axis"] = type("Sneaky", (str,), {"__repr__": lambda s: payload})("x")
    with pytest.raises(GraphVerifyError, match="not plain data"):
        verify(graph)
    source, namespace = render(graph, {"guard": None})  # a str subclass goes in as an object
    assert payload not in source and "a" in "".join(namespace)
    assert not marker.exists()


@pytest.mark.parametrize(
    "expr",
    [
        ("call", "__import__('os').system('true') or exp", ("var", "a0")),
        ("call", "exp", ("var", "a0); import os; (")),
        ("call", "add", ("var", "a0"), ("const", "__import__('os')")),
        ("call", "exp", ("var", "a0"), ("var", "a0")),  # wrong arity
    ],
)
def test_crafted_fused_expressions_are_rejected(expr: tuple) -> None:
    b = GraphBuilder("f")
    x = b.input((3,), "float64", "x")
    b.output(*b.node("exp", [x]))
    graph = b.build()
    node = graph.nodes[0]
    object.__setattr__(node, "op", "fused")
    node.attrs.update(expr=expr, args=("a0",), dtype="float64", locs=())
    with pytest.raises(GraphVerifyError, match="fused node: bad expression"):
        verify(graph)
    with pytest.raises(ValueError, match="bad expression"):
        lower_expr(expr, ("a0",), ("float64",))
    with pytest.raises(ValueError, match="bad expression"):
        render_numpy(expr)


def test_in_memory_kernel_modules_are_bounded(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(numba_elementwise, "MAX_MODULES", 3)
    names = [numba_elementwise.load_module(f"X = {i}\n").__name__ for i in range(5)]
    assert len(numba_elementwise._MODULES) == 3
    assert [n in __import__("sys").modules for n in names] == [False, False, True, True, True]
    assert numba_elementwise.load_module("X = 4\n").X == 4


def test_in_memory_cpu_kernels_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kc, "_CACHE", Recent(2))
    for k in range(4):
        expr = ("call", "add", ("call", "exp", ("var", "a0")), ("const", float(k)))
        kc.cpu_kernel(expr, ("a0",), (((3,), "float64"),))  # blocked evaluator: no numba
    assert [key[0][3][1] for key in kc._CACHE] == [2.0, 3.0]


def test_machine_code_folder_linked_out_of_the_cache(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run()
    pycache, outside = cache / "kernels" / "__pycache__", tmp_path / "outside"
    pycache.rename(outside)
    pycache.symlink_to(outside)
    fresh(monkeypatch)
    with pytest.warns(RuntimeWarning, match="not a folder .links are refused"):
        np.testing.assert_array_equal(run(), X * 0.5 + Y)
    assert kernel_stats() == (0, 1)  # not read through the link; compiled and stored inside
    assert pycache.is_dir() and not pycache.is_symlink() and list(pycache.glob("*.nbc"))
    assert len(list(outside.glob("*.nbc"))) == 1  # nothing written through the link

"""Fixed fuzzer programs whose fragments take a host kernel's path, compiled as eager: batch norm
over (1, W, N) planes runs its numba kernels forward and backward (kernels/norm), and a batch of
sequences runs the LSTM's lockstep halves (kernels/linalg/lstm_lockstep.py), in the rows form
where its parts are whole vectors."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.tracer.fuzz.compare import compiled_as_eager, differences
from tests.tracer.fuzz.spec import Piece, Spec


def _counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list:
    """Calls of ``module.name`` from now on, one entry each (it still runs)."""
    calls: list[int] = []
    function = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or function(*a, **k))
    return calls


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_over_planes_runs_its_kernel_compiled_as_eager(
    dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (1, W, N) planes after a linear layer: batch norm's numba kernels (kernels/norm) forward
    # and backward, with a batch change mid-run
    from dualflow.kernels.norm import batch_norm, batch_norm_grad

    calls = _counted(monkeypatch, batch_norm, "forward")
    grad_calls = _counted(monkeypatch, batch_norm_grad, "backward")
    spec = Spec(
        13,
        width=16,
        batches=(8, 8, 8, 8, 5),
        body=(
            Piece.of("matmul", kind="linear"),  # the planes then need a gradient: the backward
            Piece.of("batchnorm", kind="planes"),
            Piece.of("unary", kind="tanh"),
            Piece.of("batchnorm", kind="rows"),
        ),
        dtype=dtype,
        optimizer="adam",
        loss="xent",
    )
    assert compiled_as_eager(spec) == []
    assert calls  # the planes went through the kernel
    assert grad_calls  # and their backward through batch_norm_grad's


def _batched_recurrent(seed: int, units: int, batches: tuple[int, ...], kind: str = "LSTM") -> Spec:
    """A float32 LSTM (or GRU: ``kind``) over rows taken as two steps of ``batch // 2``
    sequences, then tanh."""
    body = (Piece.of("recurrent", kind=f"{kind}-batch"), Piece.of("unary", kind="tanh"))
    return Spec(seed, width=units, batches=batches, body=body, dtype="float32")


def test_a_batched_lstm_runs_its_lockstep_halves_compiled_as_eager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # rows as two steps of 16 sequences of 40 units: the LSTM's lockstep halves (float32), its
    # forward and backward, with a batch change mid-run (26 rows: two steps of 13 sequences)
    from dualflow.kernels.linalg import lstm_lockstep

    calls = _counted(monkeypatch, lstm_lockstep, "run")
    assert compiled_as_eager(_batched_recurrent(17, 40, (32, 32, 32, 26))) == []
    assert calls  # the lockstep ran


def test_a_batched_lstm_takes_the_rows_form_and_back_compiled_as_eager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 64 units (parts of 32: whole pairs of vectors) and 16 sequences a step: the rows form both
    # ways; then 13 sequences (not whole vectors): the feature-major loops, in the same run
    from dualflow.kernels.linalg import unit_tiles

    forward = _counted(monkeypatch, unit_tiles, "column_blocks")
    backward = _counted(monkeypatch, unit_tiles, "column_slices")
    assert compiled_as_eager(_batched_recurrent(23, 64, (32, 32, 26, 32))) == []
    assert forward and backward  # the rows form ran, forward and backward


def test_a_batched_gru_takes_the_rows_form_and_back_compiled_as_eager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the GRU's lockstep (kernels/linalg/gru_lockstep.py) the same way: 64 units, 16 sequences a
    # step in the rows form both ways, 13 in the feature-major loops
    from dualflow.kernels.linalg import gru_lockstep, unit_tiles

    runs = _counted(monkeypatch, gru_lockstep, "run")
    forward = _counted(monkeypatch, unit_tiles, "column_blocks")
    backward = _counted(monkeypatch, unit_tiles, "column_slices")
    assert compiled_as_eager(_batched_recurrent(29, 64, (32, 32, 26, 32), kind="GRU")) == []
    assert forward and backward  # the rows form ran, forward and backward
    assert len(runs) > len(forward) + len(backward)  # and the feature-major loops too


def test_drawn_programs_with_native_parts_compile_as_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    # the fuzzer's fast programs, widened to 128 features and 24x their batches (activations of
    # 3K-25K elements), with every flat fused kernel of 12K elements or more split over the
    # native crew's threads (kernels/numba/native_split.py), forced whether they linger or not
    from dualflow.kernels.numba import native_split, numba_elementwise
    from tests.tracer.fuzz.generator import FAST
    from tests.tracer.fuzz.test_fuzz import _fuzz

    monkeypatch.setattr(numba_elementwise, "PART_MIN", 8)
    monkeypatch.setattr(native_split, "_split_model", lambda crew, model: (0.0, 1.0))
    calls = _counted(monkeypatch, native_split, "run")

    def check(spec: Spec) -> None:
        batches = tuple(24 * b for b in spec.batches)
        wide = dataclasses.replace(spec, width=128, batches=batches)
        for passes in ("O0", "exact"):
            found = differences(wide, passes)
            assert not found, f"{wide!r} at {passes}:\n" + "\n".join(found[:10])

    assert _fuzz(FAST, 12, check) >= 12
    assert calls, "no call split over the native crew"


@pytest.mark.parametrize("kind", ["multihead", "encoder"])
def test_attention_with_its_products_on_the_native_crew_compiles_as_eager(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # attention over the rows (heads x (L, hd) @ (hd, L) and their gradients), float32, with
    # every batch of products that numpy hands to BLAS as it is split over the native crew
    # (kernels/linalg/batched_native.py), whether its workers linger or not
    from dualflow.kernels.base import crew_ranges, native_crew
    from dualflow.kernels.linalg import batched_native

    if native_crew.crew() is None:
        pytest.skip("no native crew here")
    monkeypatch.setattr(batched_native, "_pays", lambda crew, model, flops: True)
    monkeypatch.setattr(batched_native, "_too_small", lambda flops: False)
    entries: list[int] = []  # the entry point of every range split over the crew
    held = crew_ranges.run_held
    monkeypatch.setattr(
        crew_ranges, "run_held", lambda crew, at, block: entries.append(at) or held(crew, at, block)
    )
    spec = Spec(
        19,
        width=16,
        batches=(6, 6, 6, 9),
        body=(Piece.of("attention", kind=kind), Piece.of("unary", kind="tanh")),
        dtype="float32",
        penalty=0.1,
    )
    assert compiled_as_eager(spec) == []
    products = crew_ranges.entry_at(batched_native.entry)
    assert products in entries, "no batch of products split over the native crew"


def test_few_row_products_on_the_register_tiles_compile_as_eager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the fuzzer's ``tiles`` dimension, fixed: linear layers (x @ W.T, few rows) on
    # kernels/linalg/thin_gemm.py's tiles in both runs, with a gradient penalty (double backward)
    from dualflow.kernels.linalg import thin_gemm

    calls = _counted(monkeypatch, thin_gemm, "matmul")
    spec = Spec(
        23,
        width=16,
        batches=(5, 5, 7, 5),
        body=(Piece.of("matmul", kind="linear"), Piece.of("unary", kind="tanh")),
        dtype="float32",
        optimizer="adamw",
        penalty=0.1,
        tiles=True,
    )
    assert compiled_as_eager(spec) == []
    assert calls, "no product ran on the tiles"


def test_memory_bound_kernels_at_the_widest_vectors_compile_as_eager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the fuzzer's ``wide`` dimension, fixed: every flat fused kernel (the SGD update, ReLU's
    # gradient, the residual adds) at 512 bits on AVX-512, eager and compiled
    from dualflow.kernels.numba import numba_elementwise

    rendered: list[bool] = []
    body = numba_elementwise._flat_body
    monkeypatch.setattr(
        numba_elementwise, "_flat_body", lambda *a: rendered.append(a[-1]) or body(*a)
    )
    spec = Spec(
        29,
        width=32,
        batches=(64, 64, 48, 64),
        body=(Piece.of("matmul", kind="linear"), Piece.of("unary", kind="relu")),
        dtype="float32",
        wide=True,
    )
    assert compiled_as_eager(spec) == []
    assert rendered and all(rendered), "no flat kernel rendered at the widest vectors"


def test_kernels_split_on_the_crew_whatever_their_size_compile_as_eager() -> None:
    # the fuzzer's ``crew`` dimension, fixed: batch norm's kernels (``crew_rows``), the flat
    # fused kernels and Adam split over the native crew at every size, eager and compiled
    from dualflow.kernels.base import native_crew
    from dualflow.kernels.base.native_crew import POSTED

    crew = native_crew.crew()
    if crew is None:
        pytest.skip("no native crew on this platform")
    spec = Spec(
        31,
        width=16,
        batches=(8, 8, 6, 8),
        body=(
            Piece.of("matmul", kind="linear"),
            Piece.of("batchnorm", kind="planes"),
            Piece.of("unary", kind="tanh"),
        ),
        dtype="float32",
        optimizer="adam",
        crew=True,
    )
    before = int(crew.ctls[:, POSTED].sum())  # parts posted to the workers: no spy to trace
    assert compiled_as_eager(spec) == []
    assert int(crew.ctls[:, POSTED].sum()) > before, "no kernel split on the crew"


def test_small_steps_chained_from_the_first_call_compile_as_eager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the fuzzer's ``chain`` dimension, fixed: a plan's runs of small fused steps (each
    # activation's value read again by the backward, so regions end there; a new batch size
    # retraces) run as one native call each from the first call (kernels/numba/kernel_chain.py)
    from dualflow.kernels.numba import kernel_chain

    calls = _counted(monkeypatch, kernel_chain, "run_blocks")
    affine, scaled = (
        Piece.of("arith", kind="affine", a=0.5, b=1.5),
        Piece.of("broadcast", op="multiply", shape="scalar"),
    )
    unary = [Piece.of("unary", kind=k) for k in ("tanh", "sigmoid")]
    spec = Spec(
        37,
        width=16,
        batches=(8, 8, 5, 8),
        body=(affine, unary[0], scaled, unary[1]) * 2,
        dtype="float32",
        loss="square",
        chain=True,
    )
    assert compiled_as_eager(spec) == []
    assert calls, "no chain ran as one call"

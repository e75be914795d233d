"""Fixed fuzzer programs whose fragments take a host kernel's path, compiled as eager: batch norm
over (1, W, N) planes runs its numba kernels (kernels/norm), and a batch of sequences runs the
LSTM's lockstep halves (kernels/linalg/lstm_lockstep.py)."""

from __future__ import annotations

import pytest

from tests.tracer.fuzz.compare import differences
from tests.tracer.fuzz.spec import Piece, Spec


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_over_planes_runs_its_kernel_compiled_as_eager(
    dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (1, W, N) planes: batch norm's numba kernel (kernels/norm), with a batch change mid-run
    from dualflow.kernels.norm import batch_norm

    calls = []
    forward = batch_norm.forward
    monkeypatch.setattr(batch_norm, "forward", lambda *a: calls.append(1) or forward(*a))
    spec = Spec(
        13,
        width=16,
        batches=(8, 8, 8, 8, 5),
        body=(
            Piece.of("batchnorm", kind="planes"),
            Piece.of("unary", kind="tanh"),
            Piece.of("batchnorm", kind="rows"),
        ),
        dtype=dtype,
        optimizer="adam",
        loss="xent",
    )
    for passes in ("O0", "exact"):
        assert differences(spec, passes) == [], passes
    assert calls  # the planes went through the kernel


def test_a_batched_lstm_runs_its_lockstep_halves_compiled_as_eager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # rows as two steps of 16 sequences of 40 units: the LSTM's lockstep halves (float32), its
    # forward and backward, with a batch change mid-run (26 rows: two steps of 13 sequences)
    from dualflow.kernels.linalg import lstm_lockstep

    calls = []
    run = lstm_lockstep.run
    monkeypatch.setattr(lstm_lockstep, "run", lambda *a: calls.append(1) or run(*a))
    spec = Spec(
        17,
        width=40,
        batches=(32, 32, 32, 26),
        body=(Piece.of("recurrent", kind="LSTM-batch"), Piece.of("unary", kind="tanh")),
        dtype="float32",
    )
    for passes in ("O0", "exact"):
        assert differences(spec, passes) == [], passes
    assert calls  # the lockstep ran

"""Fixed fuzzer programs whose fragments take a host kernel's path: batch norm over (1, W, N)
planes runs its numba kernel (kernels/norm), compiled as eager."""

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

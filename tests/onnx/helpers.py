"""Shared by the ONNX tests: export, run with ONNX Runtime, compare with eager."""

from __future__ import annotations

import numpy as np

import dualflow


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| (the 1e-5 budget of issue 43)."""
    scale = max(float(np.abs(want).max()), 1e-30)
    return float(np.abs(got.astype(np.float64) - want).max()) / scale


def check_export(ort, fn, make_args, names, dynamic_axes, path, sizes=(2, 3), **kwargs) -> None:
    """Export ``fn`` on ``make_args(sizes[0])``, then run both sizes in ONNX Runtime vs eager."""
    model = dualflow.onnx.export(
        fn, make_args(sizes[0]), path, input_names=names, dynamic_axes=dynamic_axes, **kwargs
    )
    session = ort.InferenceSession(str(path))
    for size in sizes:
        args = make_args(size)
        want = fn(*args)
        want = want if isinstance(want, tuple) else (want,)
        got = session.run(None, {n: a.numpy() for n, a in zip(names, args, strict=True)})
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.shape == tuple(w.shape) and g.dtype == w.numpy().dtype
            assert relative_error(g, w.numpy()) <= 1e-5
    return model

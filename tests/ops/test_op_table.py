"""Tests driven by the op table: forward vs reference, infer, gradcheck, double backward."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow.autograd.eager import EAGER, meta_of
from dualflow.gradcheck import check_backward, check_double_backward
from dualflow.ops import OPS
from dualflow.ops.dispatch import interpreting
from tests.opinfo import OP_INFOS, OpInfo, Sample

ids = [info.name for info in OP_INFOS]


def _samples(info: OpInfo) -> list[Sample]:
    return info.samples(np.random.default_rng(0))


def _cast(sample: Sample, dtype: Any) -> list[Any]:
    return [
        np.asarray(v, dtype) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
        for v in sample.inputs
    ]


def _outputs(value: Any) -> tuple:
    return tuple(value) if isinstance(value, tuple | list) else (value,)


def test_every_registered_op_has_an_entry() -> None:
    covered = {name for info in OP_INFOS for name in info.covers()}
    # the IR's synthetic ops (no public function): tests/ops/test_synthetic.py
    synthetic = {name for name, op in OPS.items() if op.kind == "synthetic"}
    assert synthetic == {"guard", "fused"}
    missing = sorted(set(OPS) - covered - synthetic)
    assert not missing, f"ops without an entry in tests/opinfo.py: {missing}"
    unknown = sorted(covered - set(OPS))
    assert not unknown, f"op-table entries for ops that are not registered: {unknown}"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("info", OP_INFOS, ids=ids)
def test_forward_matches_reference(info: OpInfo, dtype: Any) -> None:
    if info.reference is None:
        pytest.skip("no numpy reference (covered by its own tests)")
    for sample in _samples(info):
        inputs = _cast(sample, dtype)
        got = _outputs(
            info.fn(
                *[dualflow.as_tensor(v) if isinstance(v, np.ndarray) else v for v in inputs],
                **sample.kwargs,
            )
        )
        want = _outputs(info.reference(*_cast(sample, np.float64), **sample.kwargs))
        assert len(got) == len(want)
        rtol, atol = (1e-12, 1e-12) if dtype == np.float64 else info.f32_tol
        for g, w in zip(got, want):
            w = np.asarray(w)
            assert g.shape == w.shape, f"{sample.name}: shape {g.shape} != {w.shape}"
            if (
                info.keeps_dtype
                and w.dtype.kind == "f"
                and any(isinstance(v, np.ndarray) and v.dtype.kind == "f" for v in inputs)
            ):
                assert g.dtype == dtype, f"{sample.name}: {dtype} input gave {g.dtype}"
            np.testing.assert_allclose(
                g.numpy().astype(np.float64), w, rtol=rtol, atol=atol, err_msg=sample.name
            )


class InferChecker:
    """An interpreter that runs every op eagerly and checks its ``infer`` against the result."""

    hooks = None  # not a tracing interpreter (dispatch.tracing())

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def apply(self, op: Any, args: tuple, attrs: dict) -> Any:
        metas = op.infer(*(meta_of(a) for a in args), **attrs)
        out = EAGER.apply(op, args, attrs)
        for meta, y in zip(metas, _outputs(out)):
            assert tuple(meta.shape) == y.shape, f"{op.name}: infer {meta.shape} != {y.shape}"
            assert np.dtype(meta.dtype) == y.dtype, f"{op.name}: infer {meta.dtype} != {y.dtype}"
        self.seen.add(op.name)
        return out


@pytest.mark.parametrize("info", OP_INFOS, ids=ids)
def test_infer_matches_actual_output(info: OpInfo) -> None:
    checker = InferChecker()
    for sample in _samples(info):
        inputs = [
            dualflow.tensor(v, requires_grad=True)
            if isinstance(v, np.ndarray) and v.dtype.kind == "f"
            else v
            for v in _cast(sample, np.float32)
        ]
        with interpreting(checker):
            outs = _outputs(info.fn(*inputs, **sample.kwargs))
            if info.differentiable:  # backward's ops are checked too
                float_outs = [o for o in outs if o.requires_grad]
                if float_outs:
                    dualflow.backward(float_outs, [np.ones(o.shape, o.dtype) for o in float_outs])
    assert set(info.covers()) <= checker.seen


def _grad_fn(info: OpInfo, sample: Sample) -> tuple[Any, list[Any]]:
    positions = sample.grad
    if positions is None:
        positions = tuple(
            i
            for i, v in enumerate(sample.inputs)
            if isinstance(v, np.ndarray) and v.dtype.kind == "f"
        )
    fixed = list(sample.inputs)

    def fn(*values: Any) -> Any:
        args = list(fixed)
        for p, v in zip(positions, values):
            args[p] = v
        return info.fn(*args, **sample.kwargs)

    return fn, [sample.inputs[p] for p in positions]


@pytest.mark.parametrize("info", [i for i in OP_INFOS if i.differentiable], ids=lambda i: i.name)
def test_gradcheck(info: OpInfo) -> None:
    for sample in _samples(info):
        fn, inputs = _grad_fn(info, sample)
        rtol, atol = info.grad_tol
        check_backward(fn, inputs, eps=info.eps, rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    "info",
    [i for i in OP_INFOS if i.double_differentiable and i.differentiable],
    ids=lambda i: i.name,
)
def test_double_backward_gradcheck(info: OpInfo) -> None:
    for sample in _samples(info):
        fn, inputs = _grad_fn(info, sample)
        rtol, atol = info.grad_tol
        check_double_backward(fn, inputs, eps=info.eps, rtol=rtol * 10, atol=atol * 10)

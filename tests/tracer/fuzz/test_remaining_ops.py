"""remaining_ops' fragments (integer-tensor indexing, padding, products, ``randn`` from the
program's generator, ``arange``/``full``, ``clone``, ``expm1``/``atan``/``log``/tanh GELU,
``stop_gradient``, ``flip``, ``argmin``, ``<=``) in one program: eager runs the ops they were
written for, and compiled at O0 and with the exact pipeline gives eager's bits while O2 keeps to
its rules.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import dualflow.ops.dispatch as dispatch
from tests.tracer.fuzz.compare import differences, rule_violations, run
from tests.tracer.fuzz.spec import Piece, Spec


def _piece(name: str, **params: object) -> Piece:
    return Piece(name, tuple(sorted(params.items())))


BODY = (
    _piece("index", kind="columns"),
    _piece("pad", kind="reflect"),
    _piece("prod", kind="rows"),
    _piece("randn"),
    _piece("math", kind="atan"),
    _piece("index", kind="rows"),
    _piece("constants"),
    _piece("clone", kind="no_grad_inplace"),
    _piece("math", kind="expm1"),
    _piece("stop_gradient"),
    _piece("pad", kind="functional"),
    _piece("math", kind="log"),
    _piece("prod", kind="batch"),
    _piece("clone", kind="plain"),
    _piece("math", kind="gelu_tanh"),
    _piece("pad", kind="edge"),
    _piece("order", kind="flip"),
    _piece("order", kind="min_dim"),
    _piece("order", kind="less_equal"),
)
OPS_WRITTEN_FOR = {
    "getitem_array",
    "pad",
    "prod",
    "random_normal",
    "arange",
    "full",
    "copy",
    "expm1",
    "atan",
    "log",
    "gelu_tanh",
    "stop_gradient",
    "flip",
    "argmin",
    "less_equal",
}


def _spec(dtype: str = "float32", mode: str = "train", penalty: float = 0.1) -> Spec:
    train = mode == "train"
    return Spec(
        7,
        dtype=dtype,
        width=10,
        batches=(6, 6, 6, 9),
        body=BODY,
        mode=mode,
        optimizer="adam" if train else None,
        penalty=penalty,
    )


def test_the_fragments_run_the_ops_they_were_written_for(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: Counter[str] = Counter()
    eager_apply = dispatch._default_apply

    def counting(op: Any, args: tuple, attrs: dict[str, Any]) -> Any:
        seen[op.name] += 1
        return eager_apply(op, args, attrs)

    monkeypatch.setattr(dispatch, "_default_apply", counting)
    records = run(_spec()).records
    assert len(records) == 4
    assert set(seen) >= OPS_WRITTEN_FOR, OPS_WRITTEN_FOR - set(seen)
    # the gradient penalty differentiates the indexing's backward (a scatter-add) once more
    assert seen["getitem_array_grad"] > 0


@pytest.mark.parametrize(
    ("dtype", "mode", "penalty"),
    [("float32", "train", 0.1), ("float64", "train", 0.0), ("float32", "eval", 0.0)],
)
def test_remaining_ops_fragments_in_one_program_are_bit_identical(
    dtype: str, mode: str, penalty: float
) -> None:
    spec = _spec(dtype, mode, penalty)
    for passes in ("O0", "exact"):
        assert differences(spec, passes) == [], passes
    violations, _ = rule_violations(spec)
    assert violations == []

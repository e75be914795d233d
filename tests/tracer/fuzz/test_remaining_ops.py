"""remaining_ops' fragments (integer-tensor indexing, padding, products, ``randn`` from the
program's generator, ``arange``/``full``, ``clone``, ``expm1``/``atan``/``log``/tanh GELU,
``stop_gradient``, ``flip``, ``argmin``, ``<=``) in one program, and ``sum_to`` in its forms:
eager runs the ops they were written for, and compiled at O0 and with the exact pipeline gives
eager's bits while O2 keeps to its rules.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import dualflow.ops.dispatch as dispatch
from tests.tracer.fuzz.compare import assert_matches_eager, run
from tests.tracer.fuzz.spec import Piece, Spec, fixed_program

BODY = (
    Piece.of("index", kind="columns"),
    Piece.of("pad", kind="reflect"),
    Piece.of("prod", kind="rows"),
    Piece.of("randn"),
    Piece.of("math", kind="atan"),
    Piece.of("index", kind="rows"),
    Piece.of("constants"),
    Piece.of("clone", kind="no_grad_inplace"),
    Piece.of("math", kind="expm1"),
    Piece.of("stop_gradient"),
    Piece.of("pad", kind="functional"),
    Piece.of("math", kind="log"),
    Piece.of("prod", kind="batch"),
    Piece.of("clone", kind="plain"),
    Piece.of("math", kind="gelu_tanh"),
    Piece.of("pad", kind="edge"),
    Piece.of("order", kind="flip"),
    Piece.of("order", kind="min_dim"),
    Piece.of("order", kind="less_equal"),
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
    return fixed_program(7, BODY, 10, dtype, mode, penalty)


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
    assert_matches_eager(_spec(dtype, mode, penalty))


def test_sum_to_both_ways_and_its_identity_read_later_is_bit_identical() -> None:
    # the memory plan's aliasing rule for sum_to: its sums are new memory (the summed values
    # take pooled buffers), its identity is the value itself, read again after new values were
    # made (a rule answering "fresh" for the identity fails here: the value's buffer is reused)
    body = (
        Piece.of("sum_to", kind="batch"),
        Piece.of("sum_to", kind="row"),
        Piece.of("sum_to", kind="identity"),
    )
    assert_matches_eager(Spec(8, width=64, batches=(256,) * 4, body=body, dtype="float32"))

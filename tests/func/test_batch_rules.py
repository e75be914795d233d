"""The op table drives vmap: every registered op has a batching rule, or is listed (with a
reason) as looping over the batch or as never seeing a batched input; every op-table entry
under vmap over a leading batch of 3 equals a Python loop of calls, eagerly and compiled, with
all its array inputs batched and with only the first one batched."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import func, ops
from dualflow.func import batch_table, batching
from dualflow.ops import OPS
from tests.opinfo import OP_INFOS, OpInfo, Sample

BATCH = 3
# the table's own function reads its target's data (np.array): vmap cannot, so copy with an op
SUBSTITUTES = {"assign": lambda target, value: ops.assign(ops.copy(target), value)}


def test_every_op_has_a_rule_or_a_listed_reason() -> None:
    for name, op in OPS.items():
        homes = [
            op.batch is not None,
            name in batch_table.LOOP_FALLBACK,
            name in batch_table.NOT_BATCHED,
        ]
        assert sum(homes) == 1, f"{name}: a batch rule, LOOP_FALLBACK or NOT_BATCHED: {homes}"
    reasons = {**batch_table.LOOP_FALLBACK, **batch_table.NOT_BATCHED}
    assert all(isinstance(r, str) and r for r in reasons.values())
    assert not set(reasons) - set(OPS)


def _examples(sample: Sample) -> list[tuple]:
    """Three examples of a sample: float arrays scaled by 1, 1.05, 1.1 (signs, order and ties
    kept, so the samples stay off kinks and inside domains), other inputs as they are."""
    out = []
    for k in range(BATCH):
        out.append(
            tuple(
                v.astype(np.float64) * (1 + 0.05 * k)
                if isinstance(v, np.ndarray) and v.dtype.kind == "f"
                else v
                for v in sample.inputs
            )
        )
    return out


def _case(info: OpInfo, sample: Sample, only_first: bool) -> tuple | None:
    examples = _examples(sample)
    arrays = [i for i, v in enumerate(sample.inputs) if isinstance(v, np.ndarray)]
    # a boolean mask index decides the result's shape: per example it could differ, so (as
    # in torch.func) it cannot be batched; it stays shared
    mapped = [i for i in arrays if sample.inputs[i].dtype != bool]
    if not mapped:
        return None
    mapped = mapped[:1] if only_first else mapped
    args = tuple(
        dualflow.tensor(np.stack([e[i] for e in examples]))
        if i in mapped
        else _tensors(examples[0][i])
        for i in range(len(sample.inputs))
    )
    in_dims = tuple(0 if i in mapped else None for i in range(len(args)))
    fn = SUBSTITUTES.get(info.name, info.fn)

    def call(*xs: Any) -> Any:
        return fn(*xs, **sample.kwargs)

    loop = []
    for b in range(BATCH):
        inputs = [x[b] if d == 0 else x for x, d in zip(args, in_dims)]
        loop.append(_leaves(call(*inputs)))
    want = [np.stack([r[j] for r in loop]) for j in range(len(loop[0]))]
    return call, args, in_dims, want


def _has_mask(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.dtype == bool
    return isinstance(value, (tuple, list)) and any(_has_mask(v) for v in value)


def _tensors(value: Any) -> Any:
    """Arrays, also inside an index tuple, as tensors: a compiled function takes no arrays."""
    if isinstance(value, np.ndarray):
        return dualflow.tensor(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_tensors(v) for v in value)
    return value


def _leaves(value: Any) -> list[np.ndarray]:
    values = list(value) if isinstance(value, (tuple, list)) else [value]
    return [v.numpy() for v in values]


def _check(got: Any, want: list[np.ndarray], what: str) -> None:
    got = _leaves(got)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (what, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("info", OP_INFOS, ids=lambda i: i.name)
def test_vmap_equals_a_loop_eager_and_compiled(info: OpInfo) -> None:
    samples = info.samples(np.random.default_rng(0))
    for sample, only_first in itertools.product(samples, (False, True)):
        case = _case(info, sample, only_first)
        if case is None:
            continue  # nothing to map over (arange, full)
        call, args, in_dims, want = case
        # 'same': a table entry that draws (dropout) makes a fresh generator per call, so every
        # example of the loop gets the same mask
        mapped = func.vmap(call, in_dims=in_dims, randomness="same")
        what = f"{sample.name} only_first={only_first}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the listed loop fallbacks warn
            _check(mapped(*args), want, f"{what} eager")
            if info.name.startswith("getitem") and _has_mask(sample.inputs):
                continue  # a boolean mask index is read eagerly: never compiled
            compiled = dualflow.compile(mapped, fallback="error")
            for _ in range(2):
                _check(compiled(*args), want, f"{what} compiled")


def _printed(r: Any) -> Any:
    ops.debug_print("row {}", r)
    return r * 2


def test_an_op_without_a_rule_loops_and_warns_once(capsys: Any) -> None:
    op = OPS["debug_print"]
    assert op.batch is None and "debug_print" in batch_table.LOOP_FALLBACK
    batching._WARNED.discard("debug_print")
    x = dualflow.tensor(np.arange(6.0).reshape(3, 2))
    with pytest.warns(UserWarning, match="op debug_print has no batching rule"):
        func.vmap(_printed)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second call warns no more
        np.testing.assert_array_equal(func.vmap(_printed)(x).numpy(), 2 * x.numpy())
    assert capsys.readouterr().out.count("row") == 6  # once per example, per call

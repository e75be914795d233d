"""Op facts that describe memory hold for what eager really returns, over the whole op table.

Lazy re-execution (issue 35) trusts two facts without data: ``aliasing="fresh"`` (the result
never shares memory with an input, so it is a plan output, not re-made by the op's kernel after
the plan) and a ``layout`` rule that says ``"C"`` (backward formulas choose by layout, and a
recorded result answers ``flags`` from the fact); the memory planner trusts an op's per-call
``aliasing_rule`` too (a "fresh" result's buffer is the op's own, not an output's). Every op
call made by every op-table sample, forward and backward, is watched: a fact that is wrong for
one call fails here.
"""

from __future__ import annotations

import warnings
from collections import defaultdict

import numpy as np
import pytest

import dualflow
from dualflow.autograd.eager import EAGER
from dualflow.graph_ir.layout import RULES, array_layout
from dualflow.ops import OPS
from dualflow.ops.dispatch import interpreting
from dualflow.runtime.aliasing import aliasing_of
from dualflow.tensor.core import Tensor
from tests.opinfo import OP_INFOS


class _Watch:
    """The eager interpreter, noting each call's broken memory facts by op name."""

    hooks = None

    def __init__(self) -> None:
        self.broken: dict[str, list[str]] = defaultdict(list)
        self.seen: set[str] = set()
        self.ruled: dict[str, set[str]] = defaultdict(set)  # what each aliasing rule answered

    def apply(self, op, args, attrs):
        out = EAGER.apply(op, args, attrs)
        self.seen.add(op.name)
        arrays = [a.raw_array if isinstance(a, Tensor) else a for a in args]
        ins = [a for a in arrays if isinstance(a, np.ndarray)]
        for o in out if isinstance(out, tuple) else (out,):
            result = o.raw_array
            kind = aliasing_of(op, [i.shape for i in ins], attrs)  # the rule's, per call
            if kind == "fresh" and any(np.shares_memory(result, i) for i in ins):
                self.broken[op.name].append(f"aliasing 'fresh' but shares an input {attrs}")
            if op.aliasing_rule is not None:
                self.ruled[op.name].add(kind)
            layouts = [array_layout(a) if hasattr(a, "shape") else "C" for a in arrays]
            says_c = RULES[op.layout](layouts) == "C"
            if says_c and result.size > 1 and not result.flags.c_contiguous:
                self.broken[op.name].append(f"layout={op.layout!r} says C, got {result.strides}")
        return out


def _run(info, sample, watch: _Watch) -> None:
    args = [
        dualflow.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a
        for a in sample.inputs
    ]
    with interpreting(watch):
        out = info.fn(*args, **sample.kwargs)
        outs = out if isinstance(out, tuple | list) else (out,)
        total = None
        for o in outs:
            if isinstance(o, Tensor) and o.requires_grad and o.dtype.kind == "f":
                total = o.sum() if total is None else total + o.sum()
        if total is not None:
            total.backward()


@pytest.fixture(scope="module")
def watched() -> _Watch:
    watch = _Watch()
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for info in OP_INFOS:
            for sample in info.samples(rng):
                try:
                    _run(info, sample, watch)
                except Exception:
                    continue
    return watch


def test_memory_facts_hold_for_every_call(watched: _Watch) -> None:
    assert not watched.broken, dict(watched.broken)


def test_the_watch_saw_the_ops_whose_facts_lazy_re_execution_trusts(watched: _Watch) -> None:
    for name in ("conv2d", "batch_norm", "softmax", "dropout_mask", "max_pool2d", "matmul"):
        assert name in watched.seen


def test_every_aliasing_rule_answered_both_ways_over_the_op_table(watched: _Watch) -> None:
    # a rule that said "fresh" and was checked above, and said otherwise for some call too:
    # the op table reaches both of its answers (sum_to: a reduction and the identity)
    ruled = [op.name for op in OPS.values() if op.aliasing_rule is not None]
    assert ruled and all(len(watched.ruled[name]) == 2 for name in ruled), dict(watched.ruled)

"""Recurrent training steps at changing sequence lengths (issues 38 and 39).

An LSTM's and a GRU's backward recurrences are one op each (``lstm_scan_grad``,
``gru_scan_grad``), so a compiled step's graph has the same nodes at every length, and a trace
with a dynamic length is a template that serves other lengths: a few traces, then plans, each
call equal to eager bit for bit.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import nn, optim
from dualflow.nn import functional as F
from tests.tracer.helpers import assert_same

VOCAB = 30


class _LM(nn.Module):
    # embedding, a 2-layer LSTM (batch first), a linear head over the vocabulary
    def __init__(self, rnn: type) -> None:
        super().__init__()
        self.emb, self.out = nn.Embedding(VOCAB, 8), nn.Linear(12, VOCAB)
        self.rnn = rnn(8, 12, 2, batch_first=True)

    def forward(self, tokens: Any) -> Any:
        hidden, _ = self.rnn(self.emb(tokens))
        return self.out(hidden)


def _make(rnn: type) -> tuple[Callable[..., Any], nn.Module]:
    dualflow.random.seed(0)
    model = _LM(rnn)
    opt = optim.Adam(model.parameters(), lr=1e-2)

    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    return step, model


_rng = np.random.default_rng(38)
LENGTHS = [5, 9, 7, 12, 5, 20, 9, 3, 16]
CALLS = [
    (
        dualflow.tensor(_rng.integers(0, VOCAB, (4, n))),
        dualflow.tensor(_rng.integers(0, VOCAB, (4, n))),
    )
    for n in LENGTHS
]


def _run(rnn: type, calls: list, **compile_kwargs: Any) -> tuple[list, list, Any]:
    fn, model = _make(rnn)
    if compile_kwargs:
        fn = dualflow.compile(fn, **compile_kwargs)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "dualflow.compile: ", RuntimeWarning)
        outputs = [fn(*args).numpy().copy() for args in calls]
    return outputs, [v.numpy().copy() for v in model.state_dict().values()], fn


@pytest.mark.parametrize("rnn", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
@pytest.mark.parametrize("passes", ["exact", None])
@pytest.mark.parametrize("dynamic", [None, True])
def test_step_serves_every_length_from_one_template(rnn: type, passes: Any, dynamic: Any) -> None:
    eager_outputs, eager_state, _ = _run(rnn, CALLS)
    outputs, state, fn = _run(rnn, CALLS, passes=passes, dynamic=dynamic)
    assert_same(outputs, eager_outputs, msg="losses")
    assert_same(state, eager_state, msg="parameters")
    stats = fn.stats()
    # Adam's single-use first step, the first template, its witness at another length; then
    # every length is a plan of the template
    assert stats.traces <= 3, stats
    assert stats.dynamic_plans >= 4 and stats.plan_runs == len(CALLS) - stats.traces, stats
    assert stats.eager_fallbacks == 0, stats


@pytest.mark.parametrize(
    ("rnn", "grad_op"), [(nn.LSTM, "lstm_scan_grad"), (nn.GRU, "gru_scan_grad")]
)
def test_step_graph_does_not_grow_with_the_length(rnn: type, grad_op: str) -> None:
    counts = []
    for n in (4, 16):
        # Adam's first step is a single-use trace: the second call's trace is the step's
        calls = [(dualflow.tensor(np.zeros((2, n), np.int64)),) * 2] * 2
        _, _, fn = _run(rnn, calls, passes="exact", dynamic=False)
        graph = fn.history[-1].graph
        counts.append(len(graph.nodes))
        assert sum(node.op == grad_op for node in graph.nodes) == 2  # one per layer
    assert counts[0] == counts[1], counts

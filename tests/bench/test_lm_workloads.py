"""The language-model workloads (issue 38): the peers' shapes, compiled steps equal to eager ones
over several Adam steps (narrow sizes through the builders' parameters), and their peer rows."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.bench.lm_workloads import build_lstm_lm, build_transformer_lm
from dualflow.bench.modes import final_state, max_difference, prepare
from dualflow.bench.peers.runner import PEERS
from dualflow.bench.workloads import WORKLOADS

_SMALL = {"vocab": 13, "width": 8, "batch": 3, "length": 5}


@pytest.mark.parametrize("build", [build_transformer_lm, build_lstm_lm])
def test_compiled_equals_eager(build) -> None:
    states = []
    for mode in ("eager", "compiled"):
        built = build(np.random.default_rng(0), **_SMALL)
        step = prepare(mode, built["step"])
        losses = [float(step().item()) for _ in range(3)]  # trace, then run the plan
        states.append(final_state(built, step()))
        assert losses[2] < losses[0]  # Adam is training it
    assert max_difference(*states) == 0.0


def test_the_issue_shapes_and_peers() -> None:
    xf = [tuple(p.shape) for p in build_transformer_lm(np.random.default_rng(0))["params"]]
    assert xf[0] == (1000, 256) and xf[-2:] == [(1000, 256), (1000,)]
    assert (768, 256) in xf and (1024, 256) in xf and len(xf) == 2 + 2 * 12 + 1
    lstm = [tuple(p.shape) for p in build_lstm_lm(np.random.default_rng(0))["params"]]
    assert lstm[1:5] == [(1024, 256), (1024, 256), (1024,), (1024,)] and len(lstm) == 1 + 8 + 2
    for name in ("transformer-lm", "lstm-lm"):
        assert WORKLOADS[name].build is not None and PEERS[name] == ("torch",)

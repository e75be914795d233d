"""``fit(compile=True)`` trains through a compiled step and matches the eager run."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.training import Trainer, fit
from tests.training.toy import make_setup


@pytest.mark.parametrize(
    ("dtype", "tolerance", "optimizer"),
    [(np.float64, 1e-10, "adam"), (np.float32, 1e-5, "adam"), (np.float32, 1e-5, "sgd")],
)
def test_compiled_fit_matches_eager(dtype, tolerance, optimizer) -> None:
    results = []
    for compiled in (False, True):
        s = make_setup(dtype=dtype, optimizer=optimizer)
        trainer = Trainer(*s.fit_args(), scheduler=s.scheduler, compile=compiled, progress=False)
        history = trainer.run(epochs=2)
        results.append((s.params(), history))
        if compiled:
            stats = trainer.step_fn.stats()
            assert stats.plan_runs >= 7 and stats.eager_fallbacks == 0  # really ran as a graph
    (eager, eager_history), (graph, graph_history) = results
    for name in eager:
        np.testing.assert_allclose(graph[name], eager[name], rtol=tolerance, atol=tolerance)
    for a, b in zip(eager_history, graph_history):
        assert b["loss"] == pytest.approx(a["loss"], rel=tolerance, abs=tolerance)


def test_compiled_run_resumes(tmp_path) -> None:
    s = make_setup()
    fit(*s.fit_args(), epochs=2, compile=True, checkpoint_path=tmp_path / "c.npz",
        checkpoint_every=7, progress=False)  # fmt: skip
    reference = s.params()
    s = make_setup(seed=5)
    fit(*s.fit_args(), epochs=2, compile=True, resume=tmp_path / "c.npz", progress=False)
    for name, value in reference.items():
        np.testing.assert_allclose(s.params()[name], value, rtol=1e-5, atol=1e-6)

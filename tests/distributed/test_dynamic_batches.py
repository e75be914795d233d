"""Ranks with different batch sizes (an uneven last batch) under one compiled step (issue 39):
each rank serves its own sizes from its template, and every rank still issues the same
all-reduces, so the parameters stay equal to eager's and to each other."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import optim
from dualflow.distributed import create_multi_node_optimizer, run_loopback
from tests.distributed.helpers import make_params, make_step

# rows per rank at each step: changing sizes, then a last batch where rank 1 has fewer rows
# (2: served by the template; 1: a size traced on its own while rank 0 runs its plan)
ROWS = [(4, 4), (6, 6), (5, 5), (7, 7)]


def _run(comm, compiled: bool, last: tuple = (3, 2)) -> tuple[list[np.ndarray], object]:
    rng = np.random.default_rng(7)
    params = make_params()
    opt = create_multi_node_optimizer(optim.SGD(params, lr=0.5), comm)
    step = make_step(params, opt)
    fn = dualflow.compile(step, fallback="error") if compiled else step
    for sizes in [*ROWS, last, (4, 4)]:
        x = rng.normal(size=(sum(sizes), 4)).astype(np.float32)
        t = rng.integers(0, 3, size=sum(sizes))
        lo = sum(sizes[: comm.rank])
        hi = lo + sizes[comm.rank]
        fn(dualflow.tensor(x[lo:hi]), dualflow.tensor(t[lo:hi]))
    return [p.numpy() for p in params], fn


@pytest.mark.parametrize("last", [(3, 2), (3, 1)])
def test_uneven_batches_across_ranks_match_eager(last: tuple) -> None:
    eager = run_loopback(lambda c: _run(c, False, last)[0], 2)
    compiled = run_loopback(lambda c: _run(c, True, last), 2)
    for (params, fn), want in zip(compiled, eager):
        for got, ref in zip(params, want):
            np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)
        stats = fn.stats()
        assert stats.traces <= 3 and stats.plan_runs >= 3, stats
    for a, b in zip(compiled[0][0], compiled[1][0]):
        np.testing.assert_array_equal(a, b)

"""Donated results of a multi-output step (``adam_update``): each result written into its own
state array where nothing later needs the old value, the tuple of ``out=`` naming only donated
states; a result whose state is read later, or returned, is allocated and committed."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.graph_ir import Graph, GraphBuilder, verify
from dualflow.runtime import lower
from dualflow.runtime.donation import donations

SCALARS = (1.0, 0.1, 0.999, 0.001, 0.01, 0.3)


def _adam(extra: str = "") -> tuple[Graph, tuple]:
    """p, m, v <- adam_update(p, g, m, v, ...), with a variation that stops one donation."""
    b = GraphBuilder("adam")
    g = b.input((40,), "float32", "g")
    p, m, v = (b.add_state((40,), "float32", name) for name in "pmv")
    scalars = [b.const(np.asarray(s, np.float32)) for s in SCALARS]
    new = b.node("adam_update", [p, g, m, v, *scalars], {"eps": 1e-8})
    outputs = [b.node("sum", [g], {"axis": None, "keepdims": False})[0]]
    if extra == "m read after":
        outputs.append(b.node("multiply", [m, 2.0])[0])
    elif extra == "v returned":
        outputs.append(new[2])
    b.output(*outputs)
    for state, value in zip((p, m, v), new):
        b.update(state, value)
    return verify(b.build()), new


def _arrays(rng: np.random.Generator) -> tuple[np.ndarray, list[np.ndarray]]:
    g, p, m = (rng.normal(size=40).astype(np.float32) for _ in range(3))
    return g, [p, m, rng.uniform(0.1, 1.0, 40).astype(np.float32)]


def test_every_result_of_the_step_is_donated_to_its_own_state() -> None:
    graph, new = _adam()
    assert donations(graph) == dict(zip(new, graph.state))


@pytest.mark.parametrize("extra", ["m read after", "v returned"])
def test_a_result_whose_old_state_is_still_needed_is_not_donated(extra: str) -> None:
    graph, new = _adam(extra)
    kept = {"m read after": 1, "v returned": 2}[extra]
    expected = {n: s for k, (n, s) in enumerate(zip(new, graph.state)) if k != kept}
    assert donations(graph) == expected


@pytest.mark.parametrize("extra", ["", "m read after"])
def test_a_donating_plan_writes_the_states_it_may_and_equals_the_committing_plan(
    extra: str,
) -> None:
    graph, _ = _adam(extra)
    rng = np.random.default_rng(0)
    g, state = _arrays(rng)
    committed = lower(graph).run([g], [a.copy() for a in state])
    plan = lower(graph, donate=True)
    source_line = next(line for line in plan.source.splitlines() if "out=(" in line)
    assert source_line.endswith("out=(v1, None, v3))" if extra else "out=(v1, v2, v3))")
    result = plan.run([g], state)
    assert plan.donated_slots == ((0, 2) if extra else (0, 1, 2))
    for k, (written, expected) in enumerate(zip(result.updates, committed.updates)):
        np.testing.assert_array_equal(written, expected)
        assert (written is state[k]) == (k in plan.donated_slots)

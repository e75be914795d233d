"""Check that compiled code computes what eager code does, with ``dualflow.debug.compare_modes``.

``compare_modes(fn, *args, orders=(0, 1, 2))`` runs ``fn`` eagerly in float64 (the reference)
and compiled in the arguments' dtype, then compares the outputs (order 0), the gradients of their
sum (order 1) and the gradients of the sum of squared gradients (order 2: double backward). This
example checks a small GELU critic that way, then a gradient penalty whose compiled graph itself
contains a double backward, then the critic under other pass pipelines. Last, it registers a
deliberately wrong fusion pass to show what a mismatch report looks like: the pass to blame
and the first wrong IR node, with the line of this file it came from.

Run: ``python examples/compare_modes.py`` (``--smoke`` is the same run on smaller arrays).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import dualflow
from dualflow import ops
from dualflow.debug import Report, compare_modes
from dualflow.graph_ir.ir import Graph
from dualflow.passes import PASSES


def critic(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    """A one-hidden-layer critic with GELU (tanh form): an elementwise chain the fuser merges,
    and smooth, so its second derivatives are not trivially zero as ReLU's are."""
    h = ops.linear(x, w1, b1)
    inner = 0.7978845608 * (h + 0.044715 * h * h * h)
    gelu = 0.5 * h * (1.0 + inner.tanh())  # the fused region ends here
    return ops.linear(gelu, w2, b2)


def gradient_penalty(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    """WGAN-GP's ``(||d critic/d x|| - 1)^2``: the double backward is inside the function, so
    it is traced into the compiled graph, and order 1 differentiates it once more."""
    (grad_x,) = dualflow.grad(critic(x, w1, b1, w2, b2).sum(), x, create_graph=True)
    norm = ops.sqrt((grad_x * grad_x).sum(axis=1) + 1e-12)
    return ((norm - 1.0) ** 2).mean()


def make_args(batch: int, hidden: int, seed: int) -> tuple[np.ndarray, ...]:
    """Inputs and weights as float32 arrays (compare_modes copies them into fresh tensors)."""
    rng = np.random.default_rng(seed)
    shapes = [(batch, 16), (hidden, 16), (hidden,), (1, hidden), (1,)]
    return tuple((rng.normal(size=s) * 0.5).astype(np.float32) for s in shapes)


def print_report(title: str, report: Report) -> None:
    """``str(report)`` is the human summary; the fields are there for code (and tests)."""
    print(f"== {title}")
    print(report)
    # worst: which compared quantity has the largest absolute difference; float32 against a
    # float64 reference is never exact, and the tolerance is per dtype (rtol 1e-4 for float32).
    print(f"   ok={report.ok} worst={report.worst!r} culprit_pass={report.culprit_pass!r}")


def other_pipelines(args: tuple[np.ndarray, ...]) -> None:
    """The same check with passes switched off or reordered: each must agree on its own."""
    print("== critic, orders (0, 1, 2), per pipeline")
    for spec in ("O0", "O1", "O2", "fuse", "dce,cse,fold,fuse"):
        report = compare_modes(critic, *args, orders=(0, 1, 2), passes=spec)
        verdict = "match" if report.ok else "MISMATCH"
        print(f"   passes={spec!r:<20} {verdict}, max abs {report.max_abs:.3g}")


def _swap_add(expr: tuple) -> tuple:
    """Rewrite every ``add`` of a fused expression as ``subtract``: a wrong kernel on purpose."""
    if expr[0] != "call":
        return expr
    name = "subtract" if expr[1] == "add" else expr[1]
    return ("call", name, *(_swap_add(e) for e in expr[2:]))


def wrong_fuse(graph: Graph) -> Graph:
    """The real fuse pass followed by a bug, as a fuser with a wrong rewrite rule would have."""
    fused = PASSES["fuse"](graph)
    nodes = tuple(
        dataclasses.replace(n, attrs={**n.attrs, "expr": _swap_add(n.attrs["expr"])})
        if n.op == "fused"
        else n
        for n in fused.nodes
    )
    return fused.replace(nodes=nodes)


@contextmanager
def registered_pass(name: str, fn: Callable[[Graph], Graph]) -> Iterator[None]:
    """Make ``fn`` usable as ``passes=(..., name)`` for a while; a pass is a named function."""
    PASSES[name] = fn
    try:
        yield
    finally:
        del PASSES[name]


def bug_detection(args: tuple[np.ndarray, ...]) -> Report:
    """A mismatch: each pass is left out in turn until the results agree, which names the
    culprit; then the forward graphs with and without it are interpreted side by side."""
    with registered_pass("wrong_fuse", wrong_fuse):
        report = compare_modes(critic, *args, orders=(0,), passes=("cse", "dce", "wrong_fuse"))
    print_report("critic with a deliberately wrong fusion pass", report)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="batch 64 (CI)")
    args = parser.parse_args(argv)
    # the fuser skips regions under 4096 elements (a kernel call would cost more than it
    # saves), so batch * hidden >= 4096 keeps the GELU fused even in the smoke run
    arrays = make_args(64 if args.smoke else args.batch, args.hidden, args.seed)
    # Order 2 differentiates the compiled call's gradients again (create_graph=True), which
    # re-runs the call eagerly (dualflow/tracer/autodiff.py, connect); the gradient penalty
    # below is the check whose compiled graph itself contains a double backward.
    good = compare_modes(critic, *arrays, orders=(0, 1, 2))
    print_report("critic, orders (0, 1, 2), default pipeline", good)
    penalty = compare_modes(gradient_penalty, *arrays, orders=(0, 1))
    print_report("gradient penalty (double backward in the compiled graph), orders (0, 1)", penalty)
    other_pipelines(arrays)
    bad = bug_detection(arrays)
    # the checks passed and the injected bug was caught: that is what a user wants to see
    return 0 if good.ok and penalty.ok and not bad.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

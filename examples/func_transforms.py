"""dualflow.func, compiled: per-example gradients of an MLP (``vmap(grad)`` over
``functional_call``) and Newton-CG steps on a logistic regression (Hessian-vector products,
never the Hessian).

Per-example gradients are what DP-SGD clips and what influence functions need: the MLP's
parameters go in as a dict, ``grad`` differentiates one example's loss with respect to them
and ``vmap`` maps that over the batch (every op batched by its rule: one graph). Newton-CG
solves ``H d = -g`` by conjugate gradients, each iteration one ``hvp`` (reverse over reverse).
Both run compiled and are checked against eager; ``--smoke`` keeps it to a second or two.
"""

from __future__ import annotations

import argparse

import numpy as np

import dualflow
from dualflow import func, nn
from dualflow.nn import functional as F


def per_example_gradients(model: nn.Module, batch: int) -> float:
    """Compiled vmap(grad) of an MLP's loss; returns the largest difference from eager."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    rng = np.random.default_rng(0)
    x = dualflow.tensor(rng.normal(size=(batch, 8)))
    y = dualflow.tensor(rng.integers(0, 3, size=batch))

    def loss(p: dict, xi: dualflow.Tensor, yi: dualflow.Tensor) -> dualflow.Tensor:
        logits = func.functional_call(model, p, (xi.unsqueeze(0),))
        return F.cross_entropy(logits, yi.unsqueeze(0))

    def grads(p: dict, x: dualflow.Tensor, y: dualflow.Tensor) -> dict:
        return func.vmap(func.grad(loss), in_dims=(None, 0, 0))(p, x, y)

    compiled = dualflow.compile(grads)
    want = grads(params, x, y)
    compiled(params, x, y)  # the trace
    got = compiled(params, x, y)  # the plan's run
    norms = sum((g.reshape(batch, -1) ** 2).sum(1) for g in got.values()).sqrt()
    print(f"per-example gradients: {len(got)} tensors of batch {batch}, norms {norms.shape}")
    print(f"  largest per-example grad norm {norms.max().item():.4f}")
    return max(float(abs(got[k] - want[k]).max()) for k in want)


def logistic_loss(w: dualflow.Tensor, features: dualflow.Tensor, labels: dualflow.Tensor):
    return F.softplus(-labels * (features @ w)).mean() + 1e-3 * (w * w).sum()


def newton_cg_step(w: dualflow.Tensor, features, labels, iters: int) -> dualflow.Tensor:
    """One Newton step: conjugate gradients on ``H d = -g`` with Hessian-vector products."""

    def loss(w):
        return logistic_loss(w, features, labels)

    g = func.grad(loss)(w)
    d, r = dualflow.zeros_like(w), -g
    p, rs = r, (r * r).sum()
    for _ in range(iters):  # a fixed count: the compiled plan is one unrolled graph
        _, (hp,) = func.hvp(loss, (w,), (p,))
        alpha = rs / ((p * hp).sum() + 1e-30)
        d, r = d + alpha * p, r - alpha * hp
        rs_new = (r * r).sum()
        p, rs = r + (rs_new / (rs + 1e-30)) * p, rs_new
    return w + d


def newton(steps: int, cg_iters: int) -> float:
    rng = np.random.default_rng(1)
    truth = rng.normal(size=5)
    features = dualflow.tensor(rng.normal(size=(200, 5)))
    labels = dualflow.tensor(np.sign(features.numpy() @ truth + 0.5 * rng.normal(size=200)))
    compiled = dualflow.compile(newton_cg_step)
    w_eager = w = dualflow.zeros(5, dtype=dualflow.float64)
    for step in range(steps):
        w = compiled(w, features, labels, cg_iters)
        w_eager = newton_cg_step(w_eager, features, labels, cg_iters)
        loss = logistic_loss(w, features, labels).item()
        print(f"newton-cg step {step + 1}: loss {loss:.6f}")
    return float(abs(w - w_eager).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a small, quick run")
    args = parser.parse_args()
    dualflow.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).double()
    batch = 8 if args.smoke else 64
    diff = per_example_gradients(model, batch)
    print(f"  compiled vs eager: max difference {diff:.3g}")
    diff = newton(steps=3 if args.smoke else 6, cg_iters=5)
    print(f"newton-cg compiled vs eager: max difference {diff:.3g}")


if __name__ == "__main__":
    main()

"""A WGAN-GP critic step: a gradient penalty through ``dualflow.grad(..., create_graph=True)``.

The penalty ``(||∇_x D(x̂)|| - 1)^2`` on random interpolates x̂ between real and fake samples needs
the gradient of the critic's output with respect to its input as a differentiable tensor, so the
critic's loss is differentiated twice. ``--compile`` also runs the same steps compiled (double
backward traced into one graph) from the same start and prints whether both agree.
"""

from __future__ import annotations

import argparse

import numpy as np

import dualflow
from dualflow import nn, ops, optim

PENALTY_WEIGHT = 10.0


def make_critic(seed: int) -> nn.Module:
    dualflow.random.seed(seed)  # the same seed gives the eager and compiled runs the same start
    return nn.Sequential(
        nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)
    )


def make_critic_step(critic: nn.Module, optimizer: optim.Optimizer):
    """``step(real, fake, eps) -> (loss, penalty)``: one critic update with gradient penalty."""

    def critic_step(real, fake, eps):
        optimizer.zero_grad()
        mixed = (eps * real + (1 - eps) * fake).requires_grad_()
        (grad_x,) = dualflow.grad(critic(mixed).sum(), mixed, create_graph=True)
        norm = ops.sqrt((grad_x * grad_x).sum(axis=1) + 1e-12)
        penalty = ((norm - 1.0) ** 2).mean()
        loss = critic(fake).mean() - critic(real).mean() + PENALTY_WEIGHT * penalty
        loss.backward()  # second order: through grad_x into the critic's weights
        optimizer.step()
        return loss, penalty

    return critic_step


def batches(steps: int, batch: int, seed: int) -> list[tuple[np.ndarray, ...]]:
    """Real samples around (2, 2), fake ones around (-1, 0), and interpolation weights."""
    rng = np.random.default_rng(seed)
    return [
        (
            rng.normal(2.0, 0.5, size=(batch, 2)).astype(np.float32),
            rng.normal((-1.0, 0.0), 1.0, size=(batch, 2)).astype(np.float32),
            rng.uniform(size=(batch, 1)).astype(np.float32),
        )
        for _ in range(steps)
    ]


def train(compiled: bool, data: list, seed: int) -> tuple[list, list, object]:
    """Run every batch through one fresh critic; return losses, parameters and the step."""
    critic = make_critic(seed)
    step = make_critic_step(critic, optim.Adam(list(critic.params()), lr=1e-3, betas=(0.5, 0.9)))
    if compiled:
        step = dualflow.compile(step)
    losses = []
    for real, fake, eps in data:
        loss, penalty = step(dualflow.tensor(real), dualflow.tensor(fake), dualflow.tensor(eps))
        losses.append((loss.item(), penalty.item()))
    return losses, [p.numpy().copy() for p in critic.params()], step


def main(argv: list[str] | None = None) -> bool:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true", help="also run compiled and compare")
    parser.add_argument("--smoke", action="store_true", help="10 steps (CI)")
    args = parser.parse_args(argv)
    steps = 10 if args.smoke else args.steps
    data = batches(steps, 64, args.seed)
    eager_losses, eager_params, _ = train(False, data, args.seed)
    for i in sorted({0, steps // 2, steps - 1}):
        loss, penalty = eager_losses[i]
        print(f"step {i:4d}: critic loss {loss:+.6f}, gradient penalty {penalty:.6f}")
    if not args.compile:
        return True
    graph_losses, graph_params, step = train(True, data, args.seed)
    diff = max(float(np.abs(a - b).max()) for a, b in zip(eager_params, graph_params))
    agree = diff <= 1e-5 and np.allclose(eager_losses, graph_losses, rtol=1e-5, atol=1e-6)
    stats = step.stats()
    print(f"compiled: {stats.traces} trace(s), {stats.plan_runs} plan runs")
    print(f"max |eager - compiled| parameter difference: {diff:.3e}")
    print(f"eager and compiled agree: {agree}")
    return agree


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)

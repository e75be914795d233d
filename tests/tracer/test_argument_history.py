"""Outputs and arguments keep their autograd meaning across plan runs: an output that requires
grad still does (with a working backward), and backward inside a compiled step through an
argument made by the caller's graph reaches the caller's parameters with this call's values
(issue 13, holes 14 and 15) — the DCGAN pattern."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim


def _gan(compiled: bool, g_inside_d_step: bool) -> list[tuple]:
    dualflow.random.seed(0)
    G = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6))
    D = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    opt_g, opt_d = optim.Adam(list(G.params()), lr=0.01), optim.Adam(list(D.params()), lr=0.01)
    rng = np.random.default_rng(0)

    def d_step(z, real):
        opt_d.zero_grad()
        fake = G(z)
        loss = ops.softplus(-D(real)).mean() + ops.softplus(D(fake.detach())).mean()
        loss.backward()
        opt_d.step()
        return loss, fake

    def g_step(fake):
        opt_g.zero_grad()
        loss = ops.softplus(-D(fake)).mean()
        loss.backward()
        opt_g.step()
        return loss

    if compiled:
        d_step, g_step = dualflow.compile(d_step), dualflow.compile(g_step)
    trail = []
    for _ in range(6):
        z = dualflow.tensor(rng.normal(size=(5, 4)).astype(np.float32))
        real = dualflow.tensor(rng.normal(size=(5, 6)).astype(np.float32))
        if g_inside_d_step:
            d_loss, fake = d_step(z, real)
        else:
            d_loss, fake = None, G(z)  # the generator runs eagerly, outside
        wants_grad = fake.requires_grad
        g_loss = g_step(fake)
        trail.append((d_loss and d_loss.item(), wants_grad, g_loss.item(), G[0].bias.tolist()))
    if compiled and not g_inside_d_step:
        assert g_step.stats().plan_runs >= 3  # really compiled, not eager
    return trail


@pytest.mark.parametrize("g_inside_d_step", [False, True], ids=["G-eager", "G-in-d_step"])
def test_generator_step_through_the_callers_graph_matches_eager(g_inside_d_step: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # G-in-d_step: g_step runs eagerly
        assert _gan(True, g_inside_d_step) == _gan(False, g_inside_d_step)


def test_an_output_that_requires_grad_keeps_a_working_backward() -> None:
    dualflow.random.seed(0)
    G = nn.Linear(3, 2)
    compiled = dualflow.compile(lambda z: G(z) * 2)
    for _ in range(4):
        out = compiled(dualflow.tensor(np.ones((2, 3), np.float32)))
        assert out.requires_grad
        G.weight.grad = None
        out.sum().backward()
        assert G.weight.grad is not None and float(abs(G.weight.grad).sum()) > 0


def test_a_returned_loss_whose_tape_was_used_inside_requires_grad_as_in_eager() -> None:
    w = dualflow.tensor([1.0, 2.0], requires_grad=True)

    def step(x):
        loss = (w * x).sum()
        loss.backward()
        return loss

    compiled = dualflow.compile(step)
    for _ in range(3):
        loss = compiled(dualflow.tensor([1.0, 1.0]))
        assert loss.requires_grad
        with pytest.raises(RuntimeError):  # its graph was freed by the backward inside
            loss.backward()


def _bce_gan(compiled: bool, returns_pair: bool) -> list[tuple]:
    """The DCGAN example's shape: the discriminator step makes ``fake`` itself, trains D on
    ``fake.detach()`` and returns ``fake`` (alone or with a number) for the generator step."""
    dualflow.random.seed(0)
    G = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6))
    D = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    opt_g, opt_d = optim.Adam(list(G.params()), lr=0.01), optim.Adam(list(D.params()), lr=0.01)
    criterion = nn.BCEWithLogitsLoss()

    def d_step(z, real):
        opt_d.zero_grad()
        fake = G(z)
        ones = dualflow.ones(real.shape[0], 1)
        loss = criterion(D(real), ones) + criterion(D(fake.detach()), ones * 0)
        loss.backward()
        opt_d.step()
        return (fake, loss) if returns_pair else fake

    def g_step(fake):
        opt_g.zero_grad()
        loss = criterion(D(fake), dualflow.ones(fake.shape[0], 1))
        loss.backward()
        opt_g.step()
        return loss

    if compiled:
        d_step, g_step = dualflow.compile(d_step), dualflow.compile(g_step)
    rng = np.random.default_rng(0)
    trail = []
    for _ in range(5):
        z = dualflow.tensor(rng.normal(size=(5, 4)).astype(np.float32))
        real = dualflow.tensor(rng.normal(size=(5, 6)).astype(np.float32))
        out = d_step(z, real)
        fake = out[0] if returns_pair else out
        trail.append((fake.requires_grad, g_step(fake).item(), G[0].bias.tolist()))
    if compiled:  # g_step backpropagates into another compiled call's output: it runs
        assert d_step.stats().plan_runs >= 3  # eagerly with a warning (docs/tracing.md)
    return trail


@pytest.mark.parametrize("returns_pair", [False, True])
def test_the_discriminator_step_returns_a_fake_that_still_trains_g(returns_pair: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert _bce_gan(True, returns_pair) == _bce_gan(False, returns_pair)

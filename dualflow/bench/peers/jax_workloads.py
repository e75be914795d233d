"""JAX (``jax.jit``) versions of the bench workloads, with the same definitions and shapes.

Imported only by ``child.py`` in a fresh process under the peers' interpreter: each builder
returns ``(step, sync)`` where ``sync`` blocks until the result is ready; ``WORKLOADS`` maps
dualflow's workload names to them. Training steps jit the whole step (value_and_grad and the SGD
update, parameters donated) as /work/shared/peers' reference scripts do. No ResNet-18 here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

MODE = "jax jit"
VERSION = jax.__version__
Built = tuple[Callable[[], Any], Callable[[Any], None]]
_RNG = np.random.default_rng(0)


def _sync(result: Any) -> None:
    jax.block_until_ready(result)


def _normal(*shape: int) -> Any:
    return jnp.asarray(_RNG.standard_normal(shape, dtype=np.float32))


def _tiny_chain(x: Any, w: Any) -> Any:
    h = x
    for _ in range(10):
        h = jax.nn.sigmoid(jnp.tanh(h * 0.9 + 0.1) * w)
    return h.sum()


def tiny_ops() -> Built:
    """50 tiny ops on 16x16 and the gradients wrt both inputs, one jitted function."""
    x, w = _normal(16, 16), _normal(16, 16)
    grads = jax.jit(jax.grad(_tiny_chain, argnums=(0, 1)))
    return (lambda: grads(x, w)), _sync


def tiny_ops_fwd() -> Built:
    """The same chain, forward only."""
    x, w = _normal(16, 16), _normal(16, 16)
    forward = jax.jit(_tiny_chain)
    return (lambda: forward(x, w)), _sync


def elementwise() -> Built:
    """``tanh(x*0.5+1)*sigmoid(x) - x**2`` on 4M float32, fused by XLA."""
    x = _normal(4 * 1024 * 1024)
    f = jax.jit(lambda x: jnp.tanh(x * 0.5 + 1) * jax.nn.sigmoid(x) - x**2)
    return (lambda: f(x)), _sync


def poly_chain() -> Built:
    """``(x*0.5+1)*(x-2) - x*x`` on 4M float32."""
    x = _normal(4 * 1024 * 1024)
    f = jax.jit(lambda x: (x * 0.5 + 1) * (x - 2) - x * x)
    return (lambda: f(x)), _sync


def _dense(sizes: tuple[int, ...]) -> list[tuple[Any, Any]]:
    return [
        (_normal(i, o) / np.float32(np.sqrt(i)), jnp.zeros(o, jnp.float32))
        for i, o in itertools.pairwise(sizes)
    ]


def _mlp(params: Any, x: Any) -> Any:
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    return h


def _cross_entropy(logits: Any, y: Any) -> Any:
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def _train(loss_fn: Callable[[Any, Any, Any], Any], params: Any, x: Any, y: Any) -> Built:
    @partial(jax.jit, donate_argnums=0)
    def train_step(params: Any, x: Any, y: Any) -> Any:
        loss, g = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.tree.map(lambda p, gp: p - 0.01 * gp, params, g), loss

    state = {"params": params}

    def step() -> Any:
        state["params"], loss = train_step(state["params"], x, y)
        return loss

    return step, _sync


def mlp() -> Built:
    """MLP 784-1000-1000-10 train step (softmax-CE, SGD lr 0.01), batch 64."""

    def loss(params: Any, x: Any, y: Any) -> Any:
        return _cross_entropy(_mlp(params, x), y)

    y = jnp.asarray(_RNG.integers(0, 10, 64))
    return _train(loss, _dense((784, 1000, 1000, 10)), _normal(64, 784), y)


def _conv(h: Any, p: Any) -> Any:
    w, b = p
    dims = ("NHWC", "HWIO", "NHWC")  # XLA's natural CPU layout
    return jax.nn.relu(lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=dims) + b)


def _cnn_loss(params: Any, x: Any, y: Any) -> Any:
    h = _conv(_conv(x, params[0]), params[1])
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = _conv(h, params[2]).mean(axis=(1, 2))
    return _cross_entropy(h @ params[3][0] + params[3][1], y)


def small_cnn() -> Built:
    """The 3-conv CNN train step, batch 32 x 32x32x3 (NHWC), SGD lr 0.01."""

    def conv_params(cin: int, cout: int) -> tuple[Any, Any]:
        w = _normal(3, 3, cin, cout) / np.float32(np.sqrt(9 * cin))
        return w, jnp.zeros(cout, jnp.float32)

    params = [conv_params(3, 32), conv_params(32, 64), conv_params(64, 64), *_dense((64, 10))]
    y = jnp.asarray(_RNG.integers(0, 10, 32))
    return _train(_cnn_loss, params, _normal(32, 32, 32, 3), y)


def gradient_penalty_mlp() -> Built:
    """Double backward through the MLP at batch 64: grads of ``sum((d sum(f(x))/dx)**2)``."""
    params, x = _dense((784, 1000, 1000, 10)), _normal(64, 784)

    def penalty(params: Any, x: Any) -> Any:
        g = jax.grad(lambda p, x: _mlp(p, x).sum(), argnums=1)(params, x)
        return jnp.sum(g**2)

    grads = jax.jit(jax.grad(penalty))
    return (lambda: grads(params, x)), _sync


WORKLOADS: dict[str, Callable[[], Built]] = {
    "tiny-ops": tiny_ops,
    "tiny-ops-fwd": tiny_ops_fwd,
    "mlp": mlp,
    "elementwise": elementwise,
    "poly-chain": poly_chain,
    "small-cnn": small_cnn,
    "gradient-penalty-mlp": gradient_penalty_mlp,
}

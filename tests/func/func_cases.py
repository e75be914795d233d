"""Functional-transform cases written once for both frameworks: each function takes the
framework's ``nn.functional`` as ``nnf`` and uses only Tensor methods with PyTorch meanings, so
``make_func_references.py`` runs them under torch.func and the tests under dualflow.func.

``CASES`` maps a case name to (transform spec, function, input names); ``inputs()`` gives the
float64 inputs (seeded numpy), shared by both sides through the stored .npz.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def mlp_loss(nnf: Any, w1: Any, b1: Any, w2: Any, b2: Any, x: Any, y: Any) -> Any:
    hidden = (x @ w1.T + b1).tanh()
    return ((hidden @ w2.T + b2 - y) ** 2).mean()


def example_loss(nnf: Any, w1: Any, b1: Any, w2: Any, b2: Any, x: Any, y: Any) -> Any:
    """One example's loss (x: features, y: targets): vmap(grad) maps it over the batch."""
    return mlp_loss(nnf, w1, b1, w2, b2, x.unsqueeze(0), y.unsqueeze(0))


def logistic(nnf: Any, w: Any, features: Any, labels: Any) -> Any:
    margins = -labels * (features @ w)
    return nnf.softplus(margins).mean() + 0.05 * (w * w).sum()


def smooth(nnf: Any, x: Any) -> Any:
    return (x.sin() * (-(x * x)).exp() + (x * x).log1p()) * x.cos()


def log_probs(nnf: Any, x: Any, a: Any) -> Any:
    return nnf.log_softmax(x @ a, dim=-1)


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(41)
    return {
        "w1": rng.normal(size=(5, 3)) * 0.5,
        "b1": rng.normal(size=(5,)) * 0.1,
        "w2": rng.normal(size=(2, 5)) * 0.5,
        "b2": rng.normal(size=(2,)) * 0.1,
        "x": rng.normal(size=(6, 3)),
        "y": rng.normal(size=(6, 2)),
        "w": rng.normal(size=(4,)) * 0.3,
        "features": rng.normal(size=(8, 4)),
        "labels": np.sign(rng.normal(size=(8,))),
        "v": rng.normal(size=(4,)),
        "z": rng.uniform(-1.5, 1.5, size=(5,)),
        "tz": rng.normal(size=(5,)),
        "a": rng.normal(size=(5, 3)),
        "zs": rng.uniform(-1.5, 1.5, size=(3, 5)),  # batches for vmap of a transform
        "ws": rng.normal(size=(3, 4)) * 0.3,
    }


MLP_ARGS = ("w1", "b1", "w2", "b2", "x", "y")
# name -> (transform, function, input names, transform arguments)
CASES: dict[str, tuple[str, Any, tuple[str, ...], dict]] = {
    "mlp_grad": ("grad", mlp_loss, MLP_ARGS, {"argnums": (0, 1, 2, 3)}),
    "mlp_hessian_w2": ("hessian", mlp_loss, MLP_ARGS, {"argnums": 2}),
    "mlp_per_example": ("vmap_grad", example_loss, MLP_ARGS, {"argnums": (0, 1, 2, 3)}),
    "logistic_hessian": ("hessian", logistic, ("w", "features", "labels"), {"argnums": 0}),
    "logistic_hvp": ("hvp", logistic, ("w", "features", "labels"), {"tangent": "v"}),
    "smooth_jacrev": ("jacrev", smooth, ("z",), {"argnums": 0}),
    "smooth_jacfwd": ("jacfwd", smooth, ("z",), {"argnums": 0}),
    "smooth_jvp": ("jvp", smooth, ("z",), {"tangent": "tz"}),
    "smooth_vjp": ("vjp", smooth, ("z",), {"cotangent": "tz"}),
    "log_probs_jacfwd": ("jacfwd", log_probs, ("z", "a"), {"argnums": (0, 1)}),
    # vmap of a transform: (inner transform, its argnums, vmap's in_dims)
    "smooth_vmap_jacrev": ("vmap_of", smooth, ("zs",), {"inner": ("jacrev", 0, 0)}),
    "smooth_vmap_jacfwd": ("vmap_of", smooth, ("zs",), {"inner": ("jacfwd", 0, 0)}),
    "log_probs_vmap_jacfwd": (
        "vmap_of",
        log_probs,
        ("zs", "a"),
        {"inner": ("jacfwd", (0, 1), (0, None))},
    ),
    "logistic_vmap_hessian": (
        "vmap_of",
        logistic,
        ("ws", "features", "labels"),
        {"inner": ("hessian", 0, (0, None, None))},
    ),
    "logistic_vmap_vmap_grad": (
        "vmap_of",
        logistic,
        ("ws", "features", "labels"),
        {"inner": ("vmap_grad", 0, (None, 0, 0))},
    ),
}


def run(func: Any, nnf: Any, name: str, values: dict[str, Any]) -> list[Any]:
    """Case ``name`` under a framework's transforms ``func`` (torch.func or dualflow.func):
    the flat list of result tensors, in a fixed order."""
    kind, fn, names, extra = CASES[name]
    args = [values[n] for n in names]

    def f(*a: Any) -> Any:
        return fn(nnf, *a)

    if kind in ("grad", "hessian", "jacrev", "jacfwd"):
        return _flat(getattr(func, kind)(f, argnums=extra["argnums"])(*args))
    if kind == "vmap_grad":
        dims = (None,) * 4 + (0, 0)
        return _flat(func.vmap(func.grad(f, argnums=extra["argnums"]), in_dims=dims)(*args))
    if kind == "vmap_of":
        inner, argnums, in_dims = extra["inner"]
        if inner == "vmap_grad":  # vmap over weights of a per-example-gradient vmap: nested
            per_example = func.vmap(func.grad(f, argnums=argnums), in_dims=in_dims)
            return _flat(func.vmap(per_example, in_dims=(0, None, None))(*args))
        transform = getattr(func, inner)(f, argnums=argnums)
        return _flat(func.vmap(transform, in_dims=in_dims)(*args))
    if kind == "jvp":
        out, tangent = func.jvp(f, tuple(args), (values[extra["tangent"]],))
        return [out, tangent]
    if kind == "vjp":
        out, vjp_fn = func.vjp(f, *args)
        return [out, *vjp_fn(values[extra["cotangent"]])]
    if kind == "hvp":  # torch.func has no hvp: its documented jvp-of-grad recipe
        tangent = values[extra["tangent"]]

        def of_w(w: Any) -> Any:
            return f(w, *args[1:])

        if hasattr(func, "hvp"):
            value, (hv,) = func.hvp(of_w, (args[0],), (tangent,))
            return [value, hv]
        return [of_w(args[0]), func.jvp(func.grad(of_w), (args[0],), (tangent,))[1]]
    raise ValueError(kind)


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]

"""``adam_update``: one Adam step of a parameter and its two moments as one op, so the update is
one pass over the arrays (``kernels.optim.adam`` on host float32/float64 arrays, eagerly and in
plans alike) instead of about fourteen elementwise steps.

Its three results may be written into the parameter's and the moments' own arrays: a plan that
donates them (``runtime.donation``) passes those arrays as ``out=``; each element is read before
it is written. The op is not differentiable (an optimizer's step never is in dualflow: see
``optim.flags``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.errors import DTypeError, ShapeError
from dualflow.kernels.backend import host_kernels
from dualflow.ops.dispatch import apply
from dualflow.ops.registry import Meta, primitive

ARRAYS = ("p", "g", "m", "v")
SCALARS = ("decay", "c1", "b2", "c2", "step_size", "root")
"""The 0-d inputs after the four arrays: AdamW's decoupled decay ``1 - lr * weight_decay`` (1 for
Adam), ``1 - b1``, ``b2``, ``1 - b2``, the step size ``lr / (1 - b1**t)`` and
``sqrt(1 - b2**t)``, each in the parameter's dtype."""


def _infer(p: Meta, g: Meta, m: Meta, v: Meta, scalars: tuple) -> tuple[Meta, Meta, Meta]:
    dtype = np.dtype(p.dtype) if not isinstance(p.dtype, type) else None
    if dtype is None or dtype.kind != "f":
        raise DTypeError(f"adam_update: the parameter must be a floating array, not {p.dtype}")
    for name, meta in zip(ARRAYS[1:], (g, m, v)):
        if tuple(meta.shape) != tuple(p.shape) or np.dtype(meta.dtype) != dtype:
            raise ShapeError(
                f"adam_update: {name} is {np.dtype(meta.dtype)}{list(meta.shape)}, the parameter "
                f"{dtype}{list(p.shape)}: they must match"
            )
    for name, meta in zip(SCALARS, scalars, strict=True):
        if tuple(meta.shape) != () or np.dtype(meta.dtype) != dtype:
            raise ShapeError(
                f"adam_update: {name} must be a 0-d {dtype} value, not "
                f"{np.dtype(meta.dtype)}{list(meta.shape)}"
            )
    out = Meta(tuple(p.shape), dtype)
    return out, out, out


def _array_update(xp: Any, p, g, m, v, scalars: tuple, eps: float, out: tuple) -> tuple:
    # the composite's operations in its order, for arrays the host kernel does not take
    decay, c1, b2, c2, step_size, root = scalars
    m1 = m + c1 * (g - m)
    v1 = v * b2 + c2 * g * g
    p1 = p * decay - step_size * m1 / (xp.sqrt(v1) / root + p.dtype.type(eps))
    results = []
    for value, target in zip((p1, m1, v1), out):
        if target is None:
            results.append(value)
        else:
            target[...] = value
            results.append(target)
    return tuple(results)


def _update(xp, p, g, m, v, *scalars, eps, out=(None, None, None)):
    kernels = host_kernels(xp, "adam", p, g, m, v)
    if kernels is not None and all(o is None or kernels.covers(o, p, p, p) for o in out):
        return kernels.update(p, g, m, v, (*scalars, eps), out)
    return _array_update(xp, p, g, m, v, scalars, eps, out)


@primitive(
    "adam_update",
    nout=3,
    aliasing="fresh",
    inplace=((0, 0), (1, 2), (2, 3)),
    out=lambda checked: _update,
)
class AdamUpdate:
    """One Adam step: ``(p', m', v')`` from the parameter, its gradient and both moments."""

    def infer(p, g, m, v, decay, c1, b2, c2, step_size, root, *, eps):
        return _infer(p, g, m, v, (decay, c1, b2, c2, step_size, root))

    def forward(xp, p, g, m, v, decay, c1, b2, c2, step_size, root, *, eps):
        return _update(xp, p, g, m, v, decay, c1, b2, c2, step_size, root, eps=eps)


def adam_update(
    p: Any, g: Any, m: Any, v: Any, decay: Any, c1: Any, b2: Any, c2: Any, step_size: Any,
    root: Any, eps: float,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """One Adam (or AdamW) step as PyTorch computes it, every operation rounded in the
    parameter's dtype: ``m' = m + c1 (g - m)``, ``v' = v b2 + c2 g g``,
    ``p' = p decay - step_size m' / (sqrt(v') / root + eps)``; returns ``(p', m', v')`` (write
    them back with ``ops.assign``). ``decay = 1 - lr * weight_decay`` (AdamW; 1 for Adam),
    ``c1 = 1 - b1``, ``c2 = 1 - b2``, ``step_size = lr / (1 - b1**t)``,
    ``root = sqrt(1 - b2**t)``: 0-d values in the parameter's dtype (numbers are rounded to it).

    Example:
        >>> import numpy as np
        >>> from dualflow import ops
        >>> one = np.ones(2, np.float32)
        >>> p, m, v = ops.adam_update(one, one * 2, one * 0, one * 0, 1.0, 0.5, 0.5, 0.5, 0.1,
        ...                           1.0, eps=0.0)
        >>> p.tolist(), m.tolist(), v.tolist()
        ([0.9292893409729004, 0.9292893409729004], [1.0, 1.0], [2.0, 2.0])
    """
    dtype = np.dtype(getattr(p, "dtype", np.float64))
    arrays = [x if hasattr(x, "shape") else np.asarray(x, dtype) for x in (p, g, m, v)]
    scalars = (decay, c1, b2, c2, step_size, root)
    scalars = [x if hasattr(x, "shape") else np.asarray(x, dtype) for x in scalars]
    return apply(AdamUpdate, *arrays, *scalars, eps=float(eps))

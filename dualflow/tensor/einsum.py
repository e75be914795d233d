"""``einsum`` with PyTorch's meaning, as a composite of existing ops: diagonals by an identity mask,
labels used once summed early, each pair of operands contracted by one batched ``matmul``.

The equation is PyTorch's: letters ``a-zA-Z``, at most one ``...`` per operand (broadcast from the
right across operands), an explicit output after ``->`` or the implicit one (the ``...`` dims, then
the letters used exactly once, in alphabetical order). Sizes of 1 broadcast against a label's size.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from dualflow import ops
from dualflow.errors import ShapeError, with_location

_ELLIPSIS_LABELS = "0123456789"  # internal labels of ``...`` dims (never letters)


def _fail(equation: str, why: str) -> ShapeError:
    return ShapeError(with_location(f"einsum({equation!r}): {why}"))


def _term_labels(term: str, ndim: int | None, width: int, equation: str) -> str:
    """A term's labels with ``...`` replaced by the last dims of the ellipsis labels."""
    if term.count("...") > 1 or "." in term.replace("...", ""):
        raise _fail(equation, f"{term!r} may hold one '...' only")
    if any(not c.isalpha() or not c.isascii() for c in term.replace("...", "")):
        raise _fail(equation, f"{term!r}: labels are letters a-z, A-Z")
    if "..." not in term:
        if ndim is not None and len(term) != ndim:
            raise _fail(equation, f"{term!r} names {len(term)} dims of an operand with {ndim}")
        return term
    count = width if ndim is None else ndim - (len(term) - 3)
    if count < 0:
        raise _fail(equation, f"{term!r} names more dims than the operand's {ndim}")
    return term.replace("...", _ELLIPSIS_LABELS[width - count : width] if count else "")


def parse(equation: str, shapes: Sequence[tuple]) -> tuple[list[str], str]:
    """Each operand's labels and the output's (``...`` dims as digit labels).

    Example:
        >>> parse("...ij,jk", [(5, 2, 3), (3, 4)])
        (['0ij', 'jk'], '0ik')
    """
    text = equation.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise _fail(equation, f"{len(terms)} operand terms for {len(shapes)} operands")
    dots = [len(s) - (len(t) - 3) for t, s in zip(terms, shapes) if "..." in t]
    width = max(dots, default=0)
    if width > len(_ELLIPSIS_LABELS):
        raise _fail(equation, "'...' covers too many dims")
    labels = [_term_labels(t, len(s), width, equation) for t, s in zip(terms, shapes)]
    if arrow:
        out = _term_labels(output, None, width, equation)
        repeated = [c for c, k in Counter(out).items() if k > 1]
        unknown = set(out) - set("".join(labels))
        if repeated or unknown:
            raise _fail(
                equation,
                f"output labels {sorted(repeated + sorted(unknown))} repeat or name no operand dim",
            )
    else:
        counts = Counter("".join(labels))
        once = sorted(c for c, k in counts.items() if k == 1 and c.isalpha())
        out = _ELLIPSIS_LABELS[:width] + "".join(once)
    return labels, out


def _diagonal(x: Any, labels: str) -> tuple[Any, str]:
    """Take the diagonal of every label repeated within one operand (by an identity mask)."""
    while len(set(labels)) < len(labels):
        label = next(c for c in labels if labels.count(c) > 1)
        p = labels.index(label)
        q = labels.index(label, p + 1)
        n = x.shape[p]
        shape = [1] * x.ndim
        shape[p] = shape[q] = n
        eye = np.eye(n, dtype=np.dtype(x.dtype)).reshape(shape)
        x = ops.sum(ops.multiply(x, eye), axis=q)
        labels = labels[:q] + labels[q + 1 :]
    return x, labels


def _sum_unused(x: Any, labels: str, keep: set[str]) -> tuple[Any, str]:
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if not axes:
        return x, labels
    return ops.sum(x, axis=axes), "".join(c for c in labels if c in keep)


def _sizes(pairs: list[tuple[Any, str]]) -> dict[str, Any]:
    """Each label's size: the operands' sizes for it agree, or are 1 (broadcast)."""
    sizes: dict[str, Any] = {}
    for x, labels in pairs:
        for c, n in zip(labels, x.shape):
            if c not in sizes or sizes[c] == 1:
                sizes[c] = n
            elif n != 1 and n != sizes[c]:
                raise ShapeError(with_location(f"einsum: label {c!r} has sizes {sizes[c]} and {n}"))
    return sizes


def _arrange(x: Any, labels: str, order: str, sizes: dict[str, Any]) -> Any:
    """``x`` with its dims in ``order`` (labels it lacks as size 1), broadcast to ``sizes``."""
    present = [c for c in order if c in labels]
    x = ops.transpose(x, tuple(labels.index(c) for c in present))
    x = ops.reshape(x, tuple(x.shape[present.index(c)] if c in labels else 1 for c in order))
    return ops.broadcast_to(x, tuple(sizes[c] for c in order))


def _contract(a: Any, la: str, b: Any, lb: str, keep: set[str]) -> tuple[Any, str]:
    """``a`` and ``b`` contracted over their shared labels not in ``keep``: one matmul."""
    sizes = _sizes([(a, la), (b, lb)])
    batch = "".join(c for c in la if c in lb and c in keep)
    inner = "".join(c for c in la if c in lb and c not in keep)
    left = "".join(c for c in la if c not in lb)
    right = "".join(c for c in lb if c not in la)
    m, k, n = (math.prod(sizes[c] for c in part) for part in (left, inner, right))
    bshape = tuple(sizes[c] for c in batch)
    a2 = ops.reshape(_arrange(a, la, batch + left + inner, sizes), (*bshape, m, k))
    b2 = ops.reshape(_arrange(b, lb, batch + inner + right, sizes), (*bshape, k, n))
    y = ops.matmul(a2, b2)
    labels = batch + left + right
    return ops.reshape(y, tuple(sizes[c] for c in labels)), labels


def einsum(equation: str, *operands: Any) -> Any:
    """Sum of products over the labels of ``equation`` (PyTorch's ``torch.einsum``); operands
    may also come as one list.

    Example:
        >>> import dualflow
        >>> a, b = dualflow.ones(2, 3), dualflow.ones(3, 4)
        >>> einsum("ij,jk->ik", a, b).shape, einsum("ii", dualflow.eye(3)).item()
        ((2, 4), 3.0)
    """
    from dualflow.tensor.core import as_tensor  # noqa: PLC0415 - core imports the methods

    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    tensors = [as_tensor(x) for x in operands]
    labels, out = parse(equation, [tuple(t.shape) for t in tensors])
    pairs = [_diagonal(t, lab) for t, lab in zip(tensors, labels)]
    x, lx = pairs[0]
    for i in range(len(pairs)):
        if i:
            y, ly = pairs[i]
            later = set(out).union(*(lab for _, lab in pairs[i + 1 :]))
            x, lx = _contract(x, lx, y, ly, later)
        needed = set(out).union(*(lab for _, lab in pairs[i + 1 :]))
        x, lx = _sum_unused(x, lx, needed)
    sizes = _sizes(pairs)
    return _arrange(x, lx, out, {c: sizes[c] for c in out})

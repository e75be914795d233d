"""A fuzzed program as plain data: which fragments, in which order, with which parameters.

A ``Spec`` is hashable and its ``repr`` is valid Python, so a failing program is reproduced by
pasting it: ``compare.differences(Spec(...), "O0")``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LOSSES = ("mse", "xent", "square")
OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam", "adamw", "rmsprop", "rmsprop_centered")
MODES = ("train", "eval")


@dataclass(frozen=True)
class Piece:
    """One fragment of a program: the fragment's registered name and its drawn parameters."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        """The parameter ``key`` (``default`` when the piece has none).

        Example:
            >>> Piece("unary", (("fn", "tanh"),)).get("fn")
            'tanh'
        """
        return dict(self.params).get(key, default)

    @classmethod
    def of(cls, name: str, **params: Any) -> Piece:
        """A piece with ``params`` given by keyword (the fixed programs of the tests).

        Example:
            >>> Piece.of("pad", kind="edge")
            Piece(name='pad', params=(('kind', 'edge'),))
        """
        return cls(name, tuple(sorted(params.items())))


@dataclass(frozen=True)
class Spec:
    """A program: fragments applied to an activation ``h`` of shape (batch, width), a loss and an
    optimizer step (``mode="train"``), or just the fragments under ``no_grad`` (``"eval"``).

    ``batches`` has one batch size per call: a change retraces. ``penalty > 0`` adds a gradient
    penalty ``penalty * sum(dloss/dx ** 2)`` (double backward). ``blas_table``: which of
    OpenBLAS's kernel tables this CPU can run both runs use (0: the running one; the process's
    table is chosen by measurement at import, ``kernels.base.blas_core``). ``tiles``: few-row
    products ``x @ W.T`` run on ``kernels.linalg.thin_gemm``'s tiles whatever their size.
    ``wide``: flat fused kernels loop at the widest vectors whatever their work
    (``kernels.base.wide_vectors``; memory-bound ones otherwise keep LLVM's width). ``crew``:
    every kernel that can split over the native crew does, whatever its size (flat fused
    kernels, Adam, the norm kernels' ``crew_rows``; ``native_split.splits`` decides otherwise).
    ``chain``: every run of small fused steps in a plan runs as one native call from its first
    call (``kernels.numba.kernel_chain``; otherwise entries not stored wait ``COMPILE_AFTER``).
    ``every_leaf``: the penalty's ``grad`` asks for x and every parameter, so no leaf below the
    loss is left out and grad() prunes nothing (``autograd.engine._reaching`` returns None);
    otherwise it asks for x alone, and the parameters' branches are pruned.
    Everything random (parameters, data, dropout keys) comes from ``seed``, so two builds of a
    spec start identical.
    """

    seed: int
    dtype: str = "float32"
    width: int = 8
    batches: tuple[int, ...] = (4, 4, 4, 4)
    body: tuple[Piece, ...] = field(default_factory=tuple)
    loss: str = "mse"
    optimizer: str | None = "sgd"
    penalty: float = 0.0
    mode: str = "train"
    blas_table: int = 0
    tiles: bool = False
    wide: bool = False
    crew: bool = False
    chain: bool = False
    every_leaf: bool = False

    @property
    def calls(self) -> int:
        """How many times the step is called."""
        return len(self.batches)

    def fragments(self) -> list[str]:
        """The fragment names in order.

        Example:
            >>> Spec(0, body=(Piece("clip"), Piece("unary"))).fragments()
            ['clip', 'unary']
        """
        return [piece.name for piece in self.body]


def fixed_program(
    seed: int, body: tuple[Piece, ...], width: int, dtype: str, mode: str, penalty: float
) -> Spec:
    """A hand-written program for the fixed tests: four calls whose batch changes once
    (6, 6, 6, 9), Adam in training, no optimizer in eval.

    Example:
        >>> fixed_program(1, (), 8, "float32", "eval", 0.0).optimizer is None
        True
    """
    train = mode == "train"
    return Spec(
        seed,
        dtype=dtype,
        width=width,
        batches=(6, 6, 6, 9),
        body=body,
        mode=mode,
        optimizer="adam" if train else None,
        penalty=penalty,
    )

"""Program fragments: the extensible, data-driven list of pieces a fuzzed step is made of.

A ``Fragment`` has a name, a hypothesis ``draw`` of its parameters, and ``make``: called once per
build with the ``Scope`` (to create parameters, modules, buffers, extra state to compare and
between-call hooks) and its ``Piece``, it returns the statement run at every call,
``statement(h, env) -> h`` on an activation of shape (batch, width). A statement may also read
``env.x``/``env.t``, write state with ``ops.assign``, read Python values, or raise.

To add fragments (say, Python-environment reads for the tracer's guards), write a module that
calls ``register(Fragment(...))`` and list it in ``MODULES``; the generator then draws them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from dualflow.tensor.core import Tensor
from tests.tracer.fuzz.scope import Env, Scope
from tests.tracer.fuzz.spec import Piece

Statement = Callable[[Tensor, Env], Tensor]
# The modules whose import registers fragments (in this order).
MODULES = (
    "tests.tracer.fuzz.library",
    "tests.tracer.fuzz.environment",
    "tests.tracer.fuzz.more_ops",
    "tests.tracer.fuzz.layers",
    "tests.tracer.fuzz.remaining_ops",
    "tests.tracer.fuzz.indexing_syntax",
    "tests.tracer.fuzz.modes",
    "tests.tracer.fuzz.late_raise",
)


@dataclass(frozen=True)
class Context:
    """What a fragment's ``draw`` may depend on."""

    dtype: str
    width: int
    mode: str


@dataclass(frozen=True)
class Fragment:
    """One kind of program piece.

    ``draw(draw, context)`` returns the piece's parameters (a dict of plain values) using
    hypothesis's ``draw``; ``make(scope, piece)`` builds its state and returns its statement.
    ``modes`` lists the program modes it fits; ``double_backward`` whether a gradient penalty
    may differentiate through it twice; ``weight`` how often the generator picks it;
    ``falls_back`` whether its statement may make a compiled step run eagerly from then on (with
    one RuntimeWarning): the comparison then expects that fallback exactly when eager reached it
    (``Scope.eager_reasons``); ``raises_late`` whether its statement may raise after the step
    wrote state (the eager reference then runs each call all or nothing, as compiled calls do).
    """

    name: str
    draw: Callable[[Any, Context], dict[str, Any]]
    make: Callable[[Scope, Piece], Statement]
    modes: tuple[str, ...] = ("train", "eval")
    double_backward: bool = True
    weight: int = 1
    falls_back: bool = False
    raises_late: bool = False


_REGISTRY: dict[str, Fragment] = {}


def draw_kind(*kinds: str) -> Callable[[Any, Context], dict[str, Any]]:
    """A fragment's ``draw`` that picks its one parameter ``kind`` among ``kinds`` (in order).

    Example:
        >>> sorted(draw_kind("a", "b")(lambda strategy: "a", None))
        ['kind']
    """
    return lambda draw, ctx: {"kind": draw(st.sampled_from(kinds))}


def register(fragment: Fragment) -> Fragment:
    """Add ``fragment`` to the registry (a name is registered once)."""
    if fragment.name in _REGISTRY:
        raise ValueError(f"fragment {fragment.name!r} is registered twice")
    _REGISTRY[fragment.name] = fragment
    return fragment


def registry() -> dict[str, Fragment]:
    """Every registered fragment by name (importing ``MODULES`` first).

    Example:
        >>> "transpose_pair" in registry()
        True
    """
    for module in MODULES:
        importlib.import_module(module)
    return _REGISTRY

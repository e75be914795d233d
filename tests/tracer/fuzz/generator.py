"""Hypothesis strategies drawing program specs from the registered fragments.

A ``Profile`` sets the sizes and lengths: ``FAST`` (the default test run: small activations,
sometimes a 4096-element one so that fused kernels run at O2) and ``SLOW`` (more and longer
programs, larger sizes). Every program is called at least 4 times with one batch size (the first
calls trace, later ones run the plan) and may change the batch size for its last calls; with
``changing=True`` (issue 39) the batch size changes between calls instead, going back and forth
between up to three sizes (batch 1 among them), so compiled steps meet new and seen sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.tracer.fuzz.build import LOSSES, OPTIMIZERS
from tests.tracer.fuzz.fragments import Context, registry
from tests.tracer.fuzz.spec import Piece, Spec


@dataclass(frozen=True)
class Profile:
    """Sizes and lengths of the drawn programs."""

    widths: tuple[int, ...]
    batches: tuple[int, ...]
    # (batch, width) with >= 4096 elements (fused kernels); 96x96 is above cpu.SELECT_MIN (eager
    # relu/relu_grad/where kernels)
    large: tuple[tuple[int, int], ...]
    large_percent: int  # how often a program uses a large activation
    max_fragments: int
    max_calls: int
    dtypes: tuple[str, ...] = ("float32", "float32", "float64")
    eval_percent: int = 20  # eval programs (inference under no_grad, where fold_bn folds)
    # programs whose flat kernels all loop at 512 bits: each compiles its memory-bound kernels
    # afresh (~1 s), so the fast profile leaves them to its fixed program (test_kernel_fragments)
    wide_percent: int = 0
    # programs whose every crew-capable kernel splits on the native crew: each generated
    # module compiles its ``split`` at its first split (~0.2 s), so the fast profile leaves
    # them to its fixed program too
    crew_percent: int = 0
    # programs whose plans run their small fused steps as chains from the first call: each
    # compiles its kernels' native entries here (~0.3 s each), so the fast profile leaves them
    # to its fixed program too
    chain_percent: int = 0


FAST = Profile(
    widths=(3, 8, 16),
    batches=(2, 5, 16),
    large=((64, 64), (96, 96)),
    large_percent=15,
    max_fragments=4,
    max_calls=5,
)
SLOW = Profile(
    widths=(3, 8, 16, 33),
    batches=(2, 5, 16, 32),
    large=((64, 64), (32, 128), (128, 48), (96, 96)),
    large_percent=25,
    max_fragments=7,
    max_calls=6,
    wide_percent=12,
    crew_percent=10,
    chain_percent=15,
)


def _shape(draw: Any, profile: Profile) -> tuple[int, int]:
    if draw(st.integers(0, 99)) < profile.large_percent:
        return draw(st.sampled_from(profile.large))
    return draw(st.sampled_from(profile.batches)), draw(st.sampled_from(profile.widths))


def _batches(draw: Any, profile: Profile, batch: int) -> tuple[int, ...]:
    calls = draw(st.integers(4, profile.max_calls))
    changed = draw(st.integers(0, calls - 3))  # the last calls may use another batch size
    other = draw(st.sampled_from([b for b in (*profile.batches, batch + 1) if b != batch]))
    return (batch,) * (calls - changed) + (other,) * changed


def _changing_batches(draw: Any, profile: Profile, batch: int) -> tuple[int, ...]:
    # up to three sizes (the first call's, then 1 or the profile's others), in any order: every
    # program changes its batch at least once and most come back to a size they traced
    others = sorted({1, batch + 1, *profile.batches} - {batch})
    sizes = (batch, *draw(st.lists(st.sampled_from(others), min_size=1, max_size=2, unique=True)))
    calls = draw(st.integers(4, profile.max_calls + 2))
    picks = draw(st.lists(st.integers(0, len(sizes) - 1), min_size=calls - 1, max_size=calls - 1))
    if not any(picks):  # at least one change
        picks[-1] = 1
    return (batch, *(sizes[i] for i in picks))


def _body(draw: Any, profile: Profile, context: Context) -> tuple[Piece, ...]:
    fragments = registry()
    names = [n for n, f in fragments.items() if context.mode in f.modes for _ in range(f.weight)]
    body = []
    for _ in range(draw(st.integers(1, profile.max_fragments))):
        name = draw(st.sampled_from(names))
        params = fragments[name].draw(draw, context)
        body.append(Piece(name, tuple(sorted(params.items()))))
    return tuple(body)


@st.composite
def specs(
    draw: Any, profile: Profile = FAST, mode: str | None = None, changing: bool = False
) -> Spec:
    """A random program spec (``mode``: force "train" or "eval"; ``changing``: its batch size
    changes between calls)."""
    if mode is None:
        mode = "eval" if draw(st.integers(0, 99)) < profile.eval_percent else "train"
    dtype = draw(st.sampled_from(profile.dtypes))
    batch, width = _shape(draw, profile)
    body = _body(draw, profile, Context(dtype, width, mode))
    spec = Spec(
        seed=draw(st.integers(0, 2**16)),
        dtype=dtype,
        width=width,
        batches=(_changing_batches if changing else _batches)(draw, profile, batch),
        body=body,
        mode=mode,
        optimizer=None,
        blas_table=draw(st.integers(0, 1)),
        tiles=draw(st.booleans()),
    )
    if mode == "train":
        fragments = registry()
        twice = all(fragments[p.name].double_backward for p in body)
        penalty = draw(st.sampled_from([0.0, 0.0, 0.0, 0.1])) if twice else 0.0
        spec = Spec(
            **{
                **spec.__dict__,
                "optimizer": draw(st.sampled_from(sorted(OPTIMIZERS))),
                "loss": draw(st.sampled_from(sorted(LOSSES))),
                "penalty": penalty,
            }
        )
    # drawn last, so the other dimensions draw as before them
    wide = draw(st.integers(0, 99)) < profile.wide_percent
    # drawn only where the profile runs it: a profile without it draws the programs it drew
    # before the dimension existed
    crew = profile.crew_percent > 0 and draw(st.integers(0, 99)) < profile.crew_percent
    chain = profile.chain_percent > 0 and draw(st.integers(0, 99)) < profile.chain_percent
    every_leaf = spec.penalty > 0 and draw(st.booleans())  # drawn only with a penalty
    return Spec(
        **{**spec.__dict__, "wide": wide, "crew": crew, "chain": chain, "every_leaf": every_leaf}
    )

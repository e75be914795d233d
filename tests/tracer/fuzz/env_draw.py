"""Drawing issue-35 programs: every construct of the grammar on its own (``minimal``), and random
compositions from a seed (``draw``), deterministic either way.

Constructs are named ``root:NAME``, ``step:NAME`` and ``sink:NAME``; with a mutation kind
(``rebind``: the root gets a new object; ``inplace``: the holder of the construct's level is
changed in place; ``through``: the construct's result is a dict read further, ``["val"]``, and
that dict is changed in place; ``none``: the root gets ``None`` for two calls, which raise) they
are the cases of ``test_each_construct`` and the keys of ``env_known.KNOWN_SILENT``.
"""

from __future__ import annotations

import random

from tests.tracer.fuzz.env_program import SIGNED_ZEROS, SINKS, VALUES, EnvProgram, Mutation
from tests.tracer.fuzz.env_roots import ROOTS
from tests.tracer.fuzz.env_steps import STEPS


def _holding_number(root: str) -> tuple[str, ...]:
    """The shortest chain a root can hold a number through."""
    if ROOTS[root].accepts("num"):
        return () if ROOTS[root].rebind is not None else ("item",)  # a default: changed in place
    return ("float_str",) if ROOTS[root].accepts("str") else ("attr",)


NO_NONE = {"environ", "environ_item", "weakref"}  # roots that cannot hold None


def _chain(step: str) -> tuple[str, ...]:
    return ("weakref", "attr") if step == "weakref" else (step,)


def _through(construct: str) -> tuple[str, tuple[str, ...]] | None:
    """(root, steps) of a ``through`` case: the construct's result read with ``["val"]``."""
    kind, name = construct.split(":")
    if kind == "root":
        if ROOTS[name].accepts("dict"):
            return name, ("item",)
        return (name, ("attr", "item")) if ROOTS[name].accepts("obj") else None
    if kind == "step" and STEPS[name].accepts("dict"):
        return "global", (*_chain(name), "item")
    return None


def cases() -> list[str]:
    """Every ``construct/mutation`` case (``test_each_construct``'s parameters).

    Example:
        >>> "step:max_key/inplace" in cases(), "root:default/rebind" in cases()
        (True, False)
    """
    found = []
    for name, root in ROOTS.items():
        found.append(f"root:{name}/{'rebind' if root.rebind is not None else 'inplace'}")
        if root.rebind is not None and name not in NO_NONE:
            found.append(f"root:{name}/none")
        if _through(f"root:{name}") is not None:
            found.append(f"root:{name}/through")
    for name in STEPS:
        found.append(f"step:{name}/rebind")
        if any(STEPS[s].put is not None for s in _chain(name)):
            found.append(f"step:{name}/inplace")
        if _through(f"step:{name}") is not None:
            found.append(f"step:{name}/through")
    found += [f"sink:{name}/rebind" for name in SINKS]
    return found


def minimal(case: str) -> EnvProgram:
    """The smallest program of a ``construct/mutation`` case: 5 calls, the value 1.0 changed to
    3.0 before call 2 and to 2.0 before call 4 (``sink:divide``: 0.0, then -0.0, then 2.0).

    Example:
        >>> minimal("step:np_item/inplace").expression()
        'CFG.item()'
    """
    construct, mutation = case.split("/")
    kind, name = construct.split(":")
    root, sink, steps = "global", "scale", ()
    if kind == "root":
        root, steps = name, _holding_number(name)
    elif kind == "step":
        steps = _chain(name)
    else:
        sink = name
    level = -1
    if mutation == "through":
        root, steps = _through(construct)
        level = len(steps) - 1
    elif mutation == "inplace":
        level = min(i for i, s in enumerate(steps) if STEPS[s].put is not None)
    first, second, third = SIGNED_ZEROS if sink == "divide" else (1.0, 3.0, 2.0)
    second = None if mutation == "none" else second
    mutations = (Mutation(2, level, second), Mutation(4, level, third))
    tag = "m_" + construct.replace(":", "_")
    return EnvProgram(root, steps, sink, first, mutations, 5, seed=len(tag), tag=tag)


def _draw_chain(rng: random.Random, avoid: set[str]) -> tuple[tuple[str, ...], str]:
    tag, steps = "num", []
    for _ in range(rng.choice([0, 1, 1, 2, 2, 3])):
        fits = [
            s.name
            for s in STEPS.values()
            if s.accepts(tag) and s.name not in steps and f"step:{s.name}" not in avoid
        ]
        if not fits:
            break
        steps.insert(0, rng.choice(fits))
        tag = STEPS[steps[0]].makes
    return tuple(steps), tag


def _mutations(
    rng: random.Random, levels: list[int], calls: int, values: tuple, root: str
) -> tuple[Mutation, ...]:
    picked = []
    for _ in range(rng.randint(1, 3)):
        level = rng.choice(levels)
        none = level < 0 and root not in NO_NONE and rng.random() < 0.1
        value = None if none else rng.choice(values)
        picked.append(Mutation(rng.randint(1, calls - 1), level, value))
    return tuple(sorted(picked, key=lambda m: m.call))


def draw(seed: int, avoid: set[str] = frozenset()) -> EnvProgram:
    """A random program from ``seed``, using no construct named in ``avoid``.

    Example:
        >>> draw(7) == draw(7)
        True
    """
    rng = random.Random(seed)
    while True:
        steps, tag = _draw_chain(rng, avoid)
        roots = [r for r in ROOTS.values() if r.accepts(tag) and f"root:{r.name}" not in avoid]
        sinks = [s for s in SINKS if f"sink:{s}" not in avoid]
        if not roots or not sinks:
            continue
        root = rng.choice(roots)
        levels = [-1] if root.rebind is not None else []
        levels += [i for i, s in enumerate(steps) if STEPS[s].put is not None]
        if not levels:
            continue
        calls = rng.randint(4, 6)
        sink = rng.choice(sinks)
        values = SIGNED_ZEROS if sink == "divide" else VALUES
        mutations = _mutations(rng, levels, calls, values, root.name)
        first = rng.choice(values)
        return EnvProgram(root.name, steps, sink, first, mutations, calls, seed, f"r{seed}")

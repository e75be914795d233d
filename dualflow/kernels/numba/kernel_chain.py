"""A run of consecutive small fused steps of a plan as one native call: each step's kernel
module's ``entry`` (``native_split``) called by address from one compiled loop (``run_blocks``).

A small fused step (under ``numba_elementwise.UNFLATTENED_MAX`` elements) costs ~0.8 us, of
which the kernel's work is ~0.1-0.2: numba's dispatch types every array and scalar argument
(~0.4 us for three arrays and three float32 constants) and the runner's Python the rest. The
bench's tiny-ops step (31 such steps) spent 24 of its 35 us in them. A chain writes every
step's block (its row range, each operand's address and length, each constant's address) into
one table once, and a call then only checks that its arrays are the very objects the table was
written for and makes one call. The table holds them by weak reference: a chain keeps no array
alive, a dead one matches nothing, and a live one's data has not moved (numpy reallocates only
for a new size, and refuses to for an array that has a weak reference or is a view;
``refcheck=False`` is numpy's own undefined case). What a
live array may change, the plan checks at every run: C order for every argument and state
array, writeability for every donated one (``Plan.run``); dtype and shape are the trace's.

Each step runs the same machine code on the same operands as its runner would (the module's
``entry`` calls its ``kernel``; an input that is ``out`` reads through the variant the runner
takes), in the plan's order, so a chain computes eager's bits. Whatever it cannot vouch for runs
the steps' runners instead, as before: an operand that is no C-ordered ndarray of the expected
dtype and size, a kernel still compiling (``background_compile``), or an entry not compiled yet.
Entries come from the kernels store (the compile worker builds them with the kernels) or, once a
chain has run ``COMPILE_AFTER`` times, are compiled here.
"""

from __future__ import annotations

import math
import operator
import weakref
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from dualflow.kernels.base import numba_cache
from dualflow.kernels.base.native_calls import BLOCK_TYPE, call_entry
from dualflow.kernels.base.native_crew import DIGEST, entry_address

COMPILE_AFTER = 1000
"""Calls of a chain after which entries not in the kernels store are compiled in this process
(~0.1 s each, saved ~0.6 us a step a call). The compile worker stores them with the kernels, so
this is for processes without it (``DUALFLOW_BACKGROUND_COMPILE=0``); tests set 0."""
_deref = getattr(operator, "call", weakref.ref.__call__)  # operator.call: Python 3.11+
GIVE_UP_AFTER = 8
"""Calls in a row that could not use the table after which a chain runs its steps one by one
for good (an operand that is a fresh scalar or a strided view at every call)."""


@dataclass(frozen=True)
class ChainLink:
    """What a chain needs of one small flat kernel: its module (``entry``), the module reading
    input k through ``out`` (``variant(k)``), which inputs are full-size (``flat``), its typed
    constants, and the dtypes and size of its operands."""

    module: Any
    variant: Any
    flat: tuple[bool, ...]
    values: tuple
    size: int
    out_dtype: np.dtype
    in_dtypes: tuple[np.dtype, ...]
    ask: Any = None  # ask(k) asks the compile worker for the entry of variant k (None: own)


def link_for(
    modules: dict, variant: Any, flat: tuple, values: tuple, program: Any, shape: tuple, ask: Any
) -> ChainLink:
    """The ``ChainLink`` of a small flat kernel (``numba_elementwise.numba_kernel``'s):
    ``modules[None]`` its module, ``variant(k)`` loading ``modules[k]``, ``ask(k)`` asking the
    compile worker for an entry (None: no asking).

    Example:
        >>> from dualflow.kernels.numba.numba_elementwise import _model_module
        >>> from dualflow.kernels.expr.typed_program import lower_expr
        >>> p = lower_expr(("call", "negative", ("var", "a0")), ("a0",), ("float32",))
        >>> link = link_for({None: _model_module()}, None, (True,), (), p, (4,), None)
        >>> link.size, link.out_dtype, link.ask is None
        (4, dtype('float32'), True)
    """
    return ChainLink(
        modules[None],
        lambda k: modules[k] if variant(k) is not None else None,  # variant(k) loads modules[k]
        flat,
        values,
        math.prod(shape),
        np.dtype(program.dtype),
        tuple(np.dtype(d) for d in program.in_dtypes),
        ask,
    )


NEVER = object()
"""``link_of``'s answer for a runner that will never have a link (a kernel too large, a
blocked evaluator): the chain runs its steps one by one for good."""


def link_of(runner: Any) -> Any:
    """The runner's ``ChainLink``; None while its kernel is compiling; ``NEVER`` when it has
    none.

    Example:
        >>> link_of(lambda xp, a: a) is NEVER
        True
    """
    link = getattr(runner, "chain_link", None)
    if link is not None:
        return link
    resolved = getattr(runner, "resolved", None)  # a kernel the compile worker is building
    if resolved is None:
        return NEVER
    built = resolved()
    return None if built is None else getattr(built, "chain_link", NEVER)


def _run_blocks(entries, table):
    # each step's entry with its block, in the plan's order (one call for the whole chain)
    for i in range(entries.shape[0]):  # pragma: no cover - runs compiled
        call_entry(entries[i], table[i])


run_blocks = numba_cache.cached_njit(_run_blocks, f"k_chain_blocks_{DIGEST}")


def entry_of(module: Any, compile_now: bool) -> int:
    """The address of ``module``'s ``entry`` (compiled, or loaded from the kernels store); 0
    where it is not there and ``compile_now`` is False, or numba cannot compile it.

    Example:
        >>> from dualflow.kernels.numba.numba_elementwise import _model_module
        >>> entry_of(_model_module(), True) > 0
        True
    """
    found = getattr(module, "chain_entry", 0)
    if found:
        return found
    if not compile_now and not numba_cache.compiled_or_stored(module.entry, (BLOCK_TYPE,)):
        return 0
    try:
        found = entry_address(module.entry)
    except numba.core.errors.NumbaError:  # an operand type numba's carray lacks
        return 0
    module.chain_entry = found
    return found


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


class _Layout:
    """A chain's table before addresses (built once its links are known): each row's fixed
    words (row range, lengths, its constants' addresses: ``held`` keeps their arrays), where
    each array slot's address goes (``positions``), what a slot's array must be (``needs``:
    dtype, size, written) and the steps reading or writing it (``users``). ValueError when a
    slot is asked to be two different things (the chain then runs its runners)."""

    def __init__(self, steps: tuple, links: list) -> None:
        width = max(4 + 2 * len(ins) + len(link.values) for link, (_, ins, _) in zip(links, steps))
        self.template = np.zeros((len(steps), width), np.int64)
        self.held: list = []
        self.positions: dict[int, list[int]] = {}
        self.needs: dict[int, tuple] = {}
        self.users: dict[int, set[int]] = {}
        for row, (link, (_, ins, out)) in enumerate(zip(links, steps)):
            words = self.template[row]
            words[1] = words[3] = link.size  # rows [0, size), out's length
            self._slot(out, row * width + 2, (link.out_dtype, link.size, True), row)
            for j, (k, full, dtype) in enumerate(zip(ins, link.flat, link.in_dtypes)):
                words[5 + 2 * j] = link.size if full else 1
                self._slot(
                    k, row * width + 4 + 2 * j, (dtype, link.size if full else 1, False), row
                )
            for j, value in enumerate(link.values):
                self.held.append(np.asarray(value).reshape(1))
                words[4 + 2 * len(ins) + j] = _address(self.held[-1])

    def _slot(self, slot: int, position: int, need: tuple, row: int) -> None:
        dtype, size, writes = need
        known = self.needs.get(slot)
        if known is not None and known[:2] != (dtype, size):
            raise ValueError(f"slot {slot} is asked to be {known[:2]} and {(dtype, size)}")
        self.needs[slot] = (dtype, size, writes or (known is not None and known[2]))
        self.positions.setdefault(slot, []).append(position)
        self.users.setdefault(slot, set()).add(row)

    def fits(self, slot: int, array: Any) -> bool:
        """Whether ``array`` is what the entries read at ``slot``: a C-ordered ndarray of the
        dtype and size, writable where a step writes it."""
        dtype, size, writes = self.needs[slot]
        return (
            type(array) is np.ndarray
            and array.dtype == dtype
            and array.size == size
            and array.flags.c_contiguous
            and (not writes or array.flags.writeable)
        )


class KernelChain:
    """``chain(arrays)`` runs ``steps`` (``(runner, input slots, out slot)`` each, slots
    indexing ``arrays``) in order, as ``runner(np, *inputs, out=out)`` would.

    Example:
        >>> chain = KernelChain(((lambda xp, a, out: np.add(a, 1, out=out), (0,), 1),))
        >>> x, y = np.zeros(2), np.empty(2)
        >>> chain((x, y)); y.tolist()
        [1.0, 1.0]
    """

    def __init__(self, steps: tuple[tuple[Any, tuple[int, ...], int], ...]) -> None:
        self.steps = steps
        self.links: list | None = None
        self.layout: _Layout | None = None
        self.refs: tuple = ()  # the arrays the table holds the addresses of, weakly
        self.entries = np.zeros(len(steps), np.int64)
        self.table: np.ndarray | None = None  # None: not written for the last call's arrays
        self.calls = self.misses = 0
        self.next_try, self.wait, self.dead = 0, 1, False

    def __call__(self, arrays: tuple) -> None:
        """Run the steps over ``arrays`` (one native call when the table is theirs)."""
        # the very arrays (alive: a dead reference matches nothing) of the table's addresses
        if self.table is not None and all(map(operator.is_, arrays, map(_deref, self.refs))):
            run_blocks(self.entries, self.table)
            return
        self.calls += 1
        if not self.dead and self.calls >= self.next_try and self._build(arrays):
            run_blocks(self.entries, self.table)
            return
        for runner, ins, out in self.steps:
            runner(np, *[arrays[k] for k in ins], out=arrays[out])

    @property
    def linked(self) -> bool:
        """Whether the last call ran as one native call."""
        return self.table is not None

    def _build(self, arrays: tuple) -> bool:
        """Write the table for ``arrays``: only the slots whose array changed since it was last
        written (an input array new at every call costs its slot, not the chain). False (the
        steps run one by one) when a kernel or an entry is not ready (tried again later) or an
        array does not fit (given up after ``GIVE_UP_AFTER`` calls in a row)."""
        table, refs, self.table, self.refs = self.table, self.refs, None, ()
        layout = self._layout()
        if layout is None:
            return False if self.dead else self._later()
        if table is None:  # the first table, or the last build failed: every slot
            table, changed = layout.template.copy(), range(len(arrays))
        else:
            changed = [k for k, (a, r) in enumerate(zip(arrays, refs)) if a is not r()]
        if not all(layout.fits(k, arrays[k]) for k in changed if k in layout.needs):
            self.misses += 1
            self.dead = self.misses >= GIVE_UP_AFTER
            return False
        rows = set().union(*(layout.users.get(k, ()) for k in changed))
        if not all([self._entry(row, arrays) for row in rows]):
            return self._later()
        flat = table.reshape(-1)
        for k in changed:
            if k in layout.positions:
                flat[layout.positions[k]] = _address(arrays[k])
        self.table, self.refs = table, tuple(map(weakref.ref, arrays))
        self.misses, self.wait = 0, 1
        return True

    def _layout(self) -> _Layout | None:
        if self.layout is None:
            found = [link_of(runner) for runner, _, _ in self.steps]
            if any(link is NEVER for link in found):
                self.dead = True
                return None
            if any(link is None for link in found):
                return None
            try:
                self.layout = _Layout(self.steps, found)
            except ValueError:  # one array asked to be two things: the runners decide
                self.dead = True
                return None
            self.links = found
        return self.layout

    def _later(self) -> bool:
        # a kernel compiling or an entry not stored: look again after twice as many calls
        self.wait = min(2 * self.wait, 64)
        self.next_try = self.calls + self.wait
        return False

    def _entry(self, row: int, arrays: tuple) -> bool:
        """Set step ``row``'s entry for ``arrays`` (the variant reading an input through
        ``out`` where that input is ``out``, as its runner picks); False when not ready."""
        link, (_, ins, out) = self.links[row], self.steps[row]
        module, which = link.module, None
        for k, slot in enumerate(ins):
            if link.flat[k] and arrays[slot] is arrays[out]:
                module, which = link.variant(k), k
                break
        found = entry_of(module, self.calls > COMPILE_AFTER)
        if not found and link.ask is not None and not getattr(module, "chain_asked", False):
            module.chain_asked = True  # the worker stores it; a later try loads it
            link.ask(which)
        self.entries[row] = found
        return bool(found)

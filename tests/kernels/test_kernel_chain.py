"""Runs of small fused steps as one native call (kernels/numba/kernel_chain.py), compiled as
eager: every output, every state array, every call, bit for bit; and the cases a chain cannot
vouch for run the steps' own runners."""

from __future__ import annotations

import dataclasses
import gc
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops
from dualflow.kernels.fused_cpu.fused_elementwise import cpu_kernel
from dualflow.kernels.numba import kernel_chain
from dualflow.kernels.numba.kernel_chain import NEVER, KernelChain, link_of


@pytest.fixture
def linked_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # entries compiled here from the first call (the compile worker is off in tests)
    monkeypatch.setattr(kernel_chain, "COMPILE_AFTER", 0)


def _chains(fn: Any) -> list[KernelChain]:
    """The chains of every plan ``fn`` (a compiled function) holds."""
    found = []
    for traces in fn.traces.values():
        for trace in traces:
            names = trace.plan._run.__globals__
            found += [v for k, v in names.items() if k.startswith("_chain")]
    return found


def _tiny(x: Any, w: Any) -> Any:
    h = x
    for _ in range(4):
        h = ops.sigmoid(ops.tanh(h * 0.9 + 0.1) * w)
    return h.sum()


def _same(a: Any, b: Any) -> None:
    for u, v in zip(a, b, strict=True):
        assert np.array_equal(u.numpy(), v.numpy()), (u, v)


def test_a_chain_of_small_steps_computes_eagers_bits(linked_at_once: None) -> None:
    rng = np.random.default_rng(0)
    x, w = (dualflow.tensor(rng.normal(size=(16, 16)).astype(np.float32), requires_grad=True)
            for _ in range(2))  # fmt: skip

    def step() -> Any:
        return dualflow.grad(_tiny(x, w), [x, w])

    compiled = dualflow.compile(step)
    for _ in range(3):
        _same(compiled(), step())
    chains = _chains(compiled)
    assert chains and all(c.linked for c in chains), "no chain ran as one call"


def test_donated_updates_in_a_chain_read_their_input_through_out(linked_at_once: None) -> None:
    # each update writes its state array in place (the variant reading that input through
    # ``out``), the second reading the first's new value
    rng = np.random.default_rng(1)
    start = [rng.normal(size=(16, 16)).astype(np.float32) for _ in range(2)]

    def build() -> tuple[Any, list]:
        p, q = (dualflow.tensor(a.copy()) for a in start)

        def step() -> Any:
            with dualflow.no_grad():
                p.copy_(ops.tanh(p * 0.5 + q))
                q.copy_(ops.sigmoid(q * p - 0.25))
            return (p * q).sum()

        return step, [p, q]

    (eager, eager_state), (step, state) = build(), build()
    compiled = dualflow.compile(step)
    for _ in range(4):
        assert np.array_equal(compiled().numpy(), eager().numpy())
        _same(state, eager_state)
    chains = _chains(compiled)
    assert chains and all(c.linked for c in chains)
    in_place = [
        any(c.refs[k]() is c.refs[out]() for k in ins) for c in chains for _, ins, out in c.steps
    ]
    assert all(in_place) and len(in_place) == 2


def test_new_input_arrays_at_every_call_rewrite_the_table(linked_at_once: None) -> None:
    f = dualflow.compile(lambda a, b: ops.tanh(a * b + 1.0) * ops.sigmoid(a - b) + a)
    rng = np.random.default_rng(2)
    for _ in range(4):
        a, b = (dualflow.tensor(rng.normal(size=(5, 7)).astype(np.float32)) for _ in range(2))
        expected = (ops.tanh(a * b + 1.0) * ops.sigmoid(a - b) + a).numpy()
        assert np.array_equal(f(a, b).numpy(), expected)


def test_a_chain_keeps_no_callers_array_alive(linked_at_once: None) -> None:
    w = dualflow.tensor(np.full((4, 4), 0.5, np.float32), requires_grad=True)
    f = dualflow.compile(lambda a: dualflow.grad(_tiny(a, w), [a, w]))
    a = dualflow.tensor(np.ones((4, 4), np.float32), requires_grad=True)
    f(a), f(a)  # the first call traces, the second runs the plan
    watched = weakref.ref(a.raw_array)
    assert any(c.linked for c in _chains(f))
    del a
    gc.collect()
    assert watched() is None


def test_an_array_a_chain_points_at_cannot_move_under_it(linked_at_once: None) -> None:
    # the table keeps addresses of arrays it matches by identity: numpy refuses to reallocate
    # an array with a weak reference (or a view), so a matched array's data is where it was
    w = dualflow.tensor(np.full((4, 4), 0.5, np.float32), requires_grad=True)
    f = dualflow.compile(lambda a: dualflow.grad(_tiny(a, w), [a, w]))
    a = dualflow.tensor(np.ones((4, 4), np.float32), requires_grad=True)
    f(a), f(a)
    chain = next(c for c in _chains(f) if c.linked)
    held = [r() for r in chain.refs if r() is not None]
    assert any(x is a.raw_array for x in held)  # the caller's own array among them
    for array in held:  # only a new size reallocates (the same size keeps the data)
        with pytest.raises(ValueError, match=r"referenced|own its data"):
            array.resize((array.size + 1,))
    _same(f(a), dualflow.grad(_tiny(a, w), [a, w]))


def test_a_new_input_array_rewrites_its_slot_only(
    linked_at_once: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a training loop's fresh batch at every call: the table takes the new array's address and
    # keeps every other (rewriting the whole table made such a call 9x slower than no chain)
    rng = np.random.default_rng(3)
    w = dualflow.tensor(rng.normal(size=(16, 16)).astype(np.float32), requires_grad=True)

    def step(x: Any) -> Any:
        return dualflow.grad(_tiny(x, w), [x, w])

    compiled = dualflow.compile(step)
    xs = [
        dualflow.tensor(rng.normal(size=(16, 16)).astype(np.float32), requires_grad=True)
        for _ in range(4)
    ]
    compiled(xs[0]), compiled(xs[0])
    written: list = []
    address = kernel_chain._address
    monkeypatch.setattr(kernel_chain, "_address", lambda a: written.append(a) or address(a))
    for x in xs[1:]:
        _same(compiled(x), step(x))
        assert [a is x.raw_array for a in written] == [True], written
        written.clear()
    assert all(c.linked for c in _chains(compiled))


def _two_step_chain() -> tuple[KernelChain, Any]:
    metas = (((3, 4), "float32"),)
    double = cpu_kernel(("call", "multiply", ("var", "a0"), ("const", 2.0)), ("a0",), metas)
    plus = cpu_kernel(("call", "add", ("var", "a0"), ("const", 1.0)), ("a0",), metas)
    # arrays: x, middle, out
    return KernelChain(((double, (0,), 1), (plus, (1,), 2))), (double, plus)


def test_an_operand_the_table_cannot_take_runs_the_runners(linked_at_once: None) -> None:
    chain, _ = _two_step_chain()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    middle, out = np.empty((3, 4), np.float32), np.empty((3, 4), np.float32)
    chain((x, middle, out))
    assert chain.linked and out.tolist() == (2 * x + 1).tolist()
    strided = np.arange(24, dtype=np.float32).reshape(3, 8)[:, ::2]  # no C-ordered array
    for _ in range(kernel_chain.GIVE_UP_AFTER):
        chain((strided, middle, out))
        assert not chain.linked and out.tolist() == (2 * strided + 1).tolist()
    assert chain.dead  # given up: the runners from now on, whatever the operands
    chain((x, middle, out))
    assert not chain.linked and out.tolist() == (2 * x + 1).tolist()


def test_an_entry_not_stored_yet_is_looked_at_again_later(monkeypatch: pytest.MonkeyPatch) -> None:
    # entries neither compiled nor stored, and fewer than COMPILE_AFTER calls: the runners
    # run, the worker is asked once, and the next look waits twice as many calls each time
    monkeypatch.setattr(kernel_chain.numba_cache, "compiled_or_stored", lambda f, sig: False)
    metas = (((2, 3), "float32"),)
    rare = cpu_kernel(("call", "subtract", ("const", 0.375), ("var", "a0")), ("a0",), metas)
    asked: list = []
    link = link_of(rare)
    monkeypatch.setattr(rare, "chain_link", dataclasses.replace(link, ask=asked.append))
    monkeypatch.setattr(link.module, "chain_entry", 0, raising=False)
    monkeypatch.setattr(link.module, "chain_asked", False, raising=False)
    chain = KernelChain(((rare, (0,), 1), (rare, (1,), 2)))
    x, mid, out = (np.full((2, 3), 1.0, np.float32) for _ in range(3))
    looks = []
    for _ in range(8):
        chain((x, mid, out))
        assert not chain.linked and out.tolist() == [[1.0] * 3] * 2  # 0.375 - (0.375 - 1)
        looks.append(chain.next_try)
    assert asked == [None]  # the kernel's own entry, asked of the worker once
    assert sorted(set(looks)) == [3, 7, 15]  # calls 1, 3 and 7 looked


def test_what_has_no_link_never_chains() -> None:
    assert link_of(lambda xp, a, out=None: a) is NEVER
    pending = lambda xp, a, out=None: a  # noqa: E731
    pending.resolved = lambda: None  # a kernel the worker is still compiling
    assert link_of(pending) is None
    chain = KernelChain(((lambda xp, a, out: np.negative(a, out=out), (0,), 1),) * 2)
    x, y = np.ones(3), np.empty(3)
    chain((x, y))
    assert chain.dead and y.tolist() == [-1.0] * 3


def test_a_chain_asks_the_worker_for_its_entries_then_loads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the compile worker on, a fresh store: the kernels compile there, the chain's first look
    # finds no entry and asks for them, a later look loads them from the store
    from dualflow.kernels.fused_cpu import fused_elementwise as kc
    from dualflow.kernels.numba import compile_worker, numba_elementwise

    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_worker, "_enabled", True)
    monkeypatch.setattr(compile_worker, "_deaths", [])
    monkeypatch.setattr(kc, "_CACHE", {})
    monkeypatch.setattr(numba_elementwise, "_MODULES", OrderedDict())
    metas = (((4, 4), "float32"),)
    twice = kc.cpu_kernel(("call", "multiply", ("var", "a0"), ("const", 2.0)), ("a0",), metas)
    plus = kc.cpu_kernel(("call", "add", ("var", "a0"), ("const", 1.0)), ("a0",), metas)
    chain = KernelChain(((twice, (0,), 1), (plus, (1,), 2)))
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    mid, out = np.empty_like(x), np.empty_like(x)
    unlinked = 0  # calls before the table: the stand-ins', then the runners' while asking
    while unlinked < 200:
        chain((x, mid, out))
        assert out.tolist() == (2 * x + 1).tolist()
        if chain.linked:
            break
        unlinked += 1
        assert compile_worker.wait(120)
    assert chain.linked and unlinked >= 2, "linked at once, or never"
    entries = [link.module.entry for link in chain.links]
    assert all(sum(e.stats.cache_hits.values()) == 1 for e in entries)  # loaded, not compiled

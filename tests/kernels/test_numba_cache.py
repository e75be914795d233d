"""numba machine code in the signed kernels store: an entry is only ever loaded for the very
function it was compiled from (a changed constant is a new entry, not the old machine code)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numba
import pytest

from dualflow.disk_cache import open_store
from dualflow.kernels.base import numba_cache


def _twice(x):
    return x * 2


def _times(k: int):
    """A function ``f(x) = x * k``: same module, name and bytecode for every k."""
    namespace = {"__name__": __name__}
    exec(f"def f(x):\n    return x * {int(k)}\n", namespace)
    return namespace["f"]


def _in_store(fn, store, stem: str):
    """``fn`` under numba without its own cache, its machine code kept in ``store`` as ``stem``."""
    dispatcher = numba.njit(cache=False)(fn)
    numba_cache.attach(dispatcher, store, stem)
    return dispatcher


def test_a_function_differing_only_in_a_constant_does_not_load_anothers_machine_code(
    tmp_path: Path,
) -> None:
    two, three = _times(2), _times(3)
    assert two.__code__.co_code == three.__code__.co_code and two.__qualname__ == "f"
    store = open_store("kernels", tmp_path)
    first = _in_store(two, store, "k_same_stem")
    assert first(5) == 10
    second = _in_store(three, store, "k_same_stem")
    assert second(5) == 15
    assert len(list(store.directory.glob("__pycache__/k_same_stem.*.nbc"))) == 2


def test_an_unchanged_function_loads_its_entry_in_a_new_dispatcher(tmp_path: Path) -> None:
    store = open_store("kernels", tmp_path)
    first = _in_store(_twice, store, "k_twice")
    assert first(4) == 8
    again = _in_store(_twice, store, "k_twice")
    assert again(4) == 8
    assert again.stats.cache_hits.get(again.signatures[0], 0) == 1


def test_a_function_whose_module_left_sys_modules_is_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # numba names such a function's module "<dynamic>", which no process can load: an entry
    # would be a warning and a compile in every later process
    module = types.ModuleType("dualflow_kernels_test_gone")
    exec("def f(x):\n    return x - 1\n", module.__dict__)
    monkeypatch.delitem(sys.modules, module.__name__, raising=False)  # never registered, or evicted
    store = open_store("kernels", tmp_path)
    gone = _in_store(module.f, store, "k_gone")
    assert gone(4) == 3
    assert not list(store.directory.glob("__pycache__/k_gone.*.nbc"))
    monkeypatch.setitem(sys.modules, module.__name__, module)  # registered: stored and loadable
    present = _in_store(module.f, store, "k_present")
    assert present(4) == 3
    assert len(list(store.directory.glob("__pycache__/k_present.*.nbc"))) == 1
    assert _in_store(module.f, store, "k_present")(4) == 3

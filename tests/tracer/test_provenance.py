"""A compiled step never runs on a Python value it cannot re-derive (issue 35).

Each case reads a configuration value through a construct the environment probe does not model
(a C function, a standard-library helper, an in-place numpy change, ``os.environ``), changes the
value between calls, and checks every compiled call against the eager one: the probe must either
guard the read or give the trace up (eager with a warning), never bake the first value in.
"""

from __future__ import annotations

import copy
import dataclasses
import operator
import os
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow.tracer import instructions

ARRAY = np.array([0.5, 2.0], np.float32)  # a module-level array changed in place


@dataclasses.dataclass
class Config:
    scale: float = 0.5
    priority: int = 1


def _x() -> dualflow.Tensor:
    return dualflow.tensor([1.0, -2.0, 3.0])


def _agree(step: Callable, change: Callable[[], None], calls: int = 5) -> Any:
    """Call ``step`` compiled and eagerly, changing the environment before the third call."""
    compiled = dualflow.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # giving up is allowed, never silence
        for call in range(calls):
            if call == 2:
                change()
            got, want = compiled(_x()).tolist(), step(_x()).tolist()
            assert got == want, f"call {call}: compiled {got} != eager {want}"
    return compiled


def _objects() -> tuple[Config, Config]:
    return Config(0.5, 1), Config(3.0, 0)


def test_max_with_a_key_picks_the_config() -> None:
    objs = list(_objects())
    _agree(
        lambda x: x * max(objs, key=lambda o: o.priority).scale,
        lambda: objs[0].__setattr__("scale", 7.0),
    )


def test_sorted_then_indexed() -> None:
    objs = list(_objects())
    _agree(
        lambda x: x * sorted(objs, key=lambda o: o.priority)[0].scale,
        lambda: objs[1].__setattr__("scale", -1.0),
    )


def test_first_value_of_a_dict() -> None:
    table = {"a": Config(0.5), "b": Config(2.0)}
    _agree(
        lambda x: x * next(iter(table.values())).scale, lambda: table["a"].__setattr__("scale", 4.0)
    )


def test_weakref_to_the_config() -> None:
    cfg = Config(0.5)
    ref = weakref.ref(cfg)
    _agree(lambda x: x * ref().scale, lambda: cfg.__setattr__("scale", 1.5))


def test_attrgetter() -> None:
    cfg = Config(0.5)
    get = operator.attrgetter("scale")
    _agree(lambda x: x * get(cfg), lambda: cfg.__setattr__("scale", 1.5))


def test_dataclasses_asdict() -> None:
    cfg = Config(0.5)
    _agree(lambda x: x * dataclasses.asdict(cfg)["scale"], lambda: cfg.__setattr__("scale", 1.5))


def test_deepcopy_of_the_config() -> None:
    cfg = Config(0.5)
    _agree(lambda x: x * copy.deepcopy(cfg).scale, lambda: cfg.__setattr__("scale", 1.5))


def test_nested_get_with_defaults_is_guarded_and_compiles() -> None:
    cfg = {"opt": {"lr": 0.5}}
    compiled = _agree(
        lambda x: x * cfg.get("opt", {}).get("lr", 1.0), lambda: cfg["opt"].update(lr=2.0)
    )
    assert compiled.stats().plan_runs >= 2  # dict.get is modeled: guarded, not given up


def test_numpy_array_item_and_float_of_an_element() -> None:
    saved = ARRAY.copy()
    try:
        _agree(lambda x: x * float(ARRAY[0]), lambda: ARRAY.__setitem__(0, 4.0))
        ARRAY[...] = saved
        _agree(lambda x: x * ARRAY[1:].sum().item(), lambda: ARRAY.__setitem__(1, 5.0))
    finally:
        ARRAY[...] = saved


def test_os_environ_get(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALFLOW_TEST_SCALE", "0.5")
    _agree(
        lambda x: x * float(os.environ.get("DUALFLOW_TEST_SCALE", "1")),
        lambda: os.environ.__setitem__("DUALFLOW_TEST_SCALE", "3.0"),
    )


def test_result_object_holding_a_tensor_is_not_reused() -> None:
    class Box:
        def __init__(self, value: Any) -> None:
            self.value = value

    compiled = dualflow.compile(lambda x: Box(x * 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for scale in (1.0, 2.0, 3.0):
            x = _x() * scale
            assert compiled(x).value.tolist() == (x * 2).tolist()


def test_plain_reads_still_compile() -> None:
    cfg = types.SimpleNamespace(scale=0.5, table={"k": 1.0}, sizes=[1.0, 2.0])
    compiled = _agree(
        lambda x: (
            (x * cfg.scale + cfg.table["k"] + sum(cfg.sizes) + max(cfg.sizes)) * len(cfg.sizes)
        ),
        lambda: cfg.sizes.append(3.0),
    )
    assert compiled.stats().plan_runs >= 2


def test_tensor_index_compiles() -> None:
    """``x[idx]`` with an integer tensor index is an op, not a Python read (issue 40: the probe
    formatted the key with ``repr``, which read the tensor). A boolean mask still fails closed:
    its values decide the output's shape."""
    idx = dualflow.tensor([2, 0])
    compiled = _agree(lambda x: x[idx] * 2, lambda: None)
    assert compiled.stats().plan_runs == 4


def test_an_untested_python_version_runs_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dualflow.tracer.env_probe.TESTED_VERSIONS", frozenset({(2, 7)}))
    compiled = dualflow.compile(lambda x: x * 2)
    with pytest.warns(RuntimeWarning, match="tested on Python 2.7 only"):
        assert compiled(_x()).tolist() == [2.0, -4.0, 6.0]
    assert compiled.stats().plan_runs == 0


def test_an_instruction_the_model_does_not_know_fails_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(instructions.HANDLERS, "BINARY_SUBSCR")
    table = {"k": 2.0}
    compiled = dualflow.compile(lambda x: x * table["k"], fallback="error")
    with pytest.raises(dualflow.errors.TracingError, match="does not model the instruction"):
        compiled(_x())


def test_every_opcode_of_this_python_has_a_handler() -> None:
    """The opcode table is complete for the versions the probe is tested on."""
    import dis
    import sys

    if sys.version_info[:2] not in instructions.TESTED_VERSIONS:
        pytest.skip("the probe is not tested on this Python")
    missing = [
        name for name in dis.opmap if instructions.handler_of(name) is instructions._not_modeled
    ]
    assert missing == [] or all(name in instructions.NOT_MODELED_ON_PURPOSE for name in missing)

"""Python values a compiled function reads outside its arguments are guarded: changing one makes
the next call retrace (and say why), never run a plan with the old value baked in (issue 13,
holes 2 and 3)."""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim

SCALE = 2.0
CONFIG = {"shift": 1.0, "sizes": [1.0, 2.0]}
model = None  # rebound by a test: a compiled step must follow the module-level name
opt = None


def _x() -> dualflow.Tensor:
    return dualflow.tensor([1.0, 2.0])


def _scaled(x):
    return x * SCALE


def test_module_global_change_retraces() -> None:
    global SCALE
    compiled = dualflow.compile(_scaled)
    try:
        assert compiled(_x()).tolist() == [2.0, 4.0]
        assert compiled(_x()).tolist() == [2.0, 4.0]
        SCALE = 5.0
        assert compiled(_x()).tolist() == [5.0, 10.0]
        assert compiled.stats().retrace_reasons[-1] == "SCALE: 2.0 -> 5.0"
    finally:
        SCALE = 2.0


@pytest.mark.parametrize("layout", ["module", "package with a _version submodule"])
def test_name_read_through_another_module(
    layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # many packages have a ``_version`` submodule (numba, setuptools-scm ones): that is not a
    # Module's version counter, so reads through the package are guarded one by one too
    if layout == "module":
        (tmp_path / "dfcfg_mod.py").write_text("SCALE = 3.0\n")
    else:
        (tmp_path / "dfcfg_mod").mkdir()
        (tmp_path / "dfcfg_mod" / "__init__.py").write_text("from . import _version\nSCALE = 3.0\n")
        (tmp_path / "dfcfg_mod" / "_version.py").write_text("version = '1.0'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import dfcfg_mod as cfg

    try:
        compiled = dualflow.compile(lambda x: x * cfg.SCALE)
        assert compiled(_x()).tolist() == [3.0, 6.0]
        assert compiled(_x()).tolist() == [3.0, 6.0]
        cfg.SCALE = 0.5
        assert compiled(_x()).tolist() == [0.5, 1.0]
        assert "cfg.SCALE: 3.0 -> 0.5" in compiled.stats().retrace_reasons[-1]
    finally:
        sys.modules.pop("dfcfg_mod", None)
        sys.modules.pop("dfcfg_mod._version", None)


def test_closure_cell_rebound_by_nonlocal() -> None:
    def make():
        scale = 2.0

        def f(x):
            return x * scale

        def set_scale(value):
            nonlocal scale
            scale = value

        return f, set_scale

    f, set_scale = make()
    compiled = dualflow.compile(f)
    assert compiled(_x()).tolist() == [2.0, 4.0] and compiled(_x()).tolist() == [2.0, 4.0]
    set_scale(3.0)
    assert compiled(_x()).tolist() == [3.0, 6.0]
    assert "closure variable scale: 2.0 -> 3.0" in compiled.stats().retrace_reasons[-1]


def test_attribute_chain_of_plain_objects_and_their_containers() -> None:
    cfg = types.SimpleNamespace(alpha=0.5, table={"k": 1.0}, sizes=[2.0, 3.0])

    class Scaler:
        def __init__(self):
            self.cfg = cfg

        def __call__(self, x):
            total = x * self.cfg.alpha + self.cfg.table["k"]
            for size in self.cfg.sizes:  # iterating reads the list's contents
                total = total + size
            return total

    scaler = Scaler()
    compiled = dualflow.compile(lambda x: scaler(x))
    for change in (
        lambda: None,
        lambda: setattr(cfg, "alpha", 0.25),
        lambda: cfg.table.update(k=-1.0),
        lambda: cfg.sizes.append(10.0),
        lambda: cfg.sizes.__setitem__(0, 0.0),
    ):
        change()
        assert compiled(_x()).tolist() == scaler(_x()).tolist()
    assert compiled.stats().traces == 5


def test_dict_and_list_on_a_module() -> None:
    compiled = dualflow.compile(lambda x: x * CONFIG["sizes"][1] + CONFIG["shift"])
    try:
        assert compiled(_x()).tolist() == [3.0, 5.0]
        CONFIG["shift"] = 0.0
        assert compiled(_x()).tolist() == [2.0, 4.0]
        CONFIG["sizes"][1] = 10.0
        assert compiled(_x()).tolist() == [10.0, 20.0]
    finally:
        CONFIG.update(shift=1.0, sizes=[1.0, 2.0])


def _train_step(x, t):
    opt.zero_grad()
    loss = ops.mean_squared_error(model(x), t)
    loss.backward()
    opt.step()
    return loss


def test_rebinding_the_model_and_optimizer_names() -> None:
    global model, opt
    x = dualflow.tensor(np.ones((4, 3), np.float32))
    t = dualflow.tensor(np.zeros((4, 1), np.float32))

    def fresh(lr: float):
        dualflow.random.seed(0)
        m = nn.Linear(3, 1)
        return m, optim.SGD(list(m.params()), lr=lr)

    compiled = dualflow.compile(_train_step)
    try:
        model, opt = fresh(0.1)
        first = [compiled(x, t).item() for _ in range(3)]
        opt = optim.SGD(list(model.params()), lr=0.0)  # a new optimizer that changes nothing
        frozen = [compiled(x, t).item() for _ in range(2)]
        assert frozen[0] == frozen[1] and frozen[0] < first[0]
        model, opt = fresh(0.1)  # a new model: it must get the updates
        again = [compiled(x, t).item() for _ in range(3)]
        assert again == first and model.weight.grad is not None
    finally:
        model = opt = None


def test_guard_check_costs_are_per_guard(tmp_path: Path) -> None:
    """explain lists the environment guards of a trace (what is read, from where)."""
    compiled = dualflow.compile(_scaled)
    compiled(_x())
    text = str(dualflow.explain(compiled))
    assert "environment guards" in text and "SCALE" in text


def test_code_outside_the_package_is_followed_by_the_probe() -> None:
    source = textwrap.dedent(
        """
        import dualflow
        LIMIT = 1.0
        def f(x):
            return x * LIMIT
        """
    )
    namespace: dict = {}
    exec(compile(source, "<user script>", "exec"), namespace)
    compiled = dualflow.compile(namespace["f"])
    assert compiled(_x()).tolist() == [1.0, 2.0]
    namespace["LIMIT"] = 4.0
    assert compiled(_x()).tolist() == [4.0, 8.0]

"""The plan cache on disk: a second compiled function (or process) loads a stored trace instead
of tracing, binds it to its own objects, gives the same results, and misses whenever the code,
signature, state, mode or dualflow itself differs."""

from __future__ import annotations

import collections
import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import _version, nn, ops, optim
from dualflow._config import cache_dir
from dualflow.tracer import plan_cache
from tests.tracer.helpers import assert_same, tol


def _model(seed: int = 0) -> nn.Module:
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    for p in model.params():
        p.array[...] = rng.normal(size=p.shape).astype(np.float32) * 0.3
    return model


def _batch(n: int = 8) -> tuple[dualflow.Tensor, dualflow.Tensor]:
    rng = np.random.default_rng(1)
    x = dualflow.tensor(rng.normal(size=(n, 6)).astype(np.float32))
    return x, dualflow.tensor(rng.integers(0, 3, n))


def make_step(cache_dir: Any, momentum: float = 0.0, compiled: bool = True) -> tuple[Any, Any]:
    """A fresh model + optimizer and a train step closing over them (same code every time)."""
    model = _model()
    opt = optim.SGD(model.params(), lr=0.1, momentum=momentum)

    def step(x, y):
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return (dualflow.compile(step, cache_dir=cache_dir) if compiled else step), model


def _run(step: Any, steps: int = 3) -> list[float]:
    x, y = _batch()
    return [step(x, y).item() for _ in range(steps)]


def test_second_function_loads_instead_of_tracing(tmp_path: Path) -> None:
    first, _ = make_step(tmp_path)
    _run(first)
    assert first.stats().traces == 1 and first.stats().cache_stores == 1
    second, model = make_step(tmp_path)  # new model and optimizer objects, same code
    losses = _run(second)
    assert second.stats().traces == 0 and second.stats().cache_loads == 1
    eager, eager_model = make_step(None, compiled=False)
    want = _run(eager)
    np.testing.assert_allclose(losses, want, **tol(np.float32))
    for got, ref in zip(model.params(), eager_model.params()):
        np.testing.assert_allclose(got.array, ref.array, **tol(np.float32))
    note = second.history[0].cache_note
    assert note.startswith("loaded from " + str(tmp_path)), note
    assert "plan cache: 1 traces loaded" in str(dualflow.explain(second))


def test_lazily_created_optimizer_state_loads_on_the_second_call(tmp_path: Path) -> None:
    first, _ = make_step(tmp_path, momentum=0.9)
    _run(first)
    assert first.stats().traces == 2  # single-use trace creating the momentum buffers, then one
    second, model = make_step(tmp_path, momentum=0.9)
    losses = _run(second, steps=4)
    assert (second.stats().traces, second.stats().cache_loads) == (1, 1)
    eager, eager_model = make_step(None, momentum=0.9, compiled=False)
    np.testing.assert_allclose(losses, _run(eager, steps=4), **tol(np.float32))
    for got, ref in zip(model.params(), eager_model.params()):
        np.testing.assert_allclose(got.array, ref.array, **tol(np.float32))


def test_signature_training_flag_and_version_changes_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = make_step(tmp_path)
    _run(first)
    other_batch, _ = make_step(tmp_path)
    x, y = _batch(5)
    other_batch(x, y)
    assert other_batch.stats().cache_loads == 0 and other_batch.stats().traces == 1
    eval_mode, model = make_step(tmp_path)
    model.eval()
    _run(eval_mode)
    assert eval_mode.stats().cache_loads == 0
    monkeypatch.setattr(_version, "__version__", "999.0")  # what dualflow.__version__ reads
    plan_cache.package_digest.cache_clear()
    try:
        bumped, _ = make_step(tmp_path)
        _run(bumped)
        assert bumped.stats().cache_loads == 0 and bumped.stats().traces == 1
    finally:
        monkeypatch.undo()
        plan_cache.package_digest.cache_clear()


def test_edited_user_source_invalidates_the_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "user_body.py"
    source.write_text("def body(x):\n    return x * 2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("user_body")

    def make() -> Any:
        return dualflow.compile(lambda x: module.body(x) + 1.0, cache_dir=tmp_path / "c")

    x = dualflow.tensor([1.0, 2.0])
    assert make()(x).tolist() == [3.0, 5.0]
    source.write_text("def body(x):\n    return x * 3.0  # edited\n")
    importlib.reload(module)
    again = make()
    assert again(x).tolist() == [4.0, 7.0]
    assert again.stats().cache_loads == 0 and again.stats().traces == 1
    sys.modules.pop("user_body", None)


def test_state_that_cannot_be_found_again_is_not_stored(tmp_path: Path) -> None:
    class Holder:
        __slots__ = ("w",)  # no __dict__: the path walk cannot see inside

    holder = Holder()
    holder.w = dualflow.tensor([2.0, 3.0])
    f = dualflow.compile(lambda x: x * holder.w, cache_dir=tmp_path)
    assert f(dualflow.tensor([1.0, 1.0])).tolist() == [2.0, 3.0]
    assert f.stats().cache_stores == 0
    assert "not stored in the plan cache" in f.history[0].cache_note
    assert "w" in f.history[0].cache_note or "Tensor" in f.history[0].cache_note


def test_namedtuple_outputs_run_but_are_not_stored(tmp_path: Path) -> None:
    Pair = collections.namedtuple("Pair", "a b")
    f = dualflow.compile(lambda x: Pair(x * 2, x + 1), cache_dir=tmp_path)
    out = f(dualflow.tensor([1.0]))
    assert (out.a.tolist(), out.b.tolist()) == ([2.0], [2.0])
    assert "not stored" in f.history[0].cache_note


def test_loaded_guards_still_guard(tmp_path: Path) -> None:
    def make() -> Any:
        def f(x):
            return x * 2 if x.sum().item() > 0 else x - 1

        return dualflow.compile(f, cache_dir=tmp_path)

    make()(dualflow.tensor([1.0, 2.0]))  # guards item() == 3.0
    loaded = make()
    assert loaded(dualflow.tensor([2.0, 1.0])).tolist() == [4.0, 2.0]
    assert loaded.stats().cache_loads == 1
    assert loaded(dualflow.tensor([-3.0, 1.0])).tolist() == [-4.0, 0.0]  # the guard fails
    stats = loaded.stats()
    assert (stats.guard_failures, stats.traces, stats.cache_loads) == (1, 1, 1)
    assert loaded(dualflow.tensor([1.5, 1.5])).tolist() == [3.0, 3.0]  # the loaded trace again


def test_loaded_backward_plan_matches_eager(tmp_path: Path) -> None:
    def make(cache: Any) -> tuple[Any, nn.Module]:
        model = _model(3)
        loss_fn = lambda x: (model(x) ** 2).mean()  # noqa: E731 - the same code object each time
        return (dualflow.compile(loss_fn, cache_dir=cache) if cache else loss_fn), model

    x, _ = _batch()
    first, _ = make(tmp_path)
    first(x).backward()
    loaded, model = make(tmp_path)
    loaded(x).backward()  # the backward graph came from disk too
    assert loaded.stats().cache_loads == 1 and loaded.history[0].backward is not None
    eager, ref = make(None)
    eager(x).backward()
    for got, want in zip(model.params(), ref.params()):
        assert_same(got.grad, want.grad, **tol(np.float32))


def test_cache_dir_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUALFLOW_PLAN_CACHE", str(tmp_path))
    assert plan_cache.plan_cache_dir(None) == tmp_path
    monkeypatch.setenv("DUALFLOW_PLAN_CACHE", "1")
    assert plan_cache.plan_cache_dir(None) == cache_dir() / "plans"
    monkeypatch.delenv("DUALFLOW_PLAN_CACHE")
    assert dualflow.compile(lambda x: x).cache_dir is None


_SCRIPT = """
import json, sys
import numpy as np
import dualflow
from dualflow import ops, optim
from dualflow.vision.models import resnet18

model = resnet18(num_classes=4, cifar_stem=True, width=0.125)
opt = optim.SGD(model.params(), lr=0.05)

@dualflow.compile(cache_dir=sys.argv[1])
def step(x, y):
    opt.zero_grad()
    loss = ops.softmax_cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss

rng = np.random.default_rng(0)
x = dualflow.tensor(rng.normal(size=(2, 3, 8, 8)).astype(np.float32))
y = dualflow.tensor(rng.integers(0, 4, 2))
losses = [step(x, y).item() for _ in range(3)]
s = step.stats()
print(json.dumps({"losses": losses, "traces": s.traces, "loads": s.cache_loads,
                  "compile": s.compile_seconds, "load": s.load_seconds}))
"""


def test_a_second_process_skips_tracing(tmp_path: Path) -> None:
    import json
    import os
    import subprocess

    script = tmp_path / "train_step.py"
    script.write_text(_SCRIPT)
    # Fresh kernel and plan caches: the first process traces, runs the passes and lowers; the
    # second finds the stored plan.
    env = {**os.environ, "DUALFLOW_CACHE_DIR": str(tmp_path / "kernels")}

    def run() -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "plans")],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert (first["traces"], first["loads"]) == (1, 0)
    assert (second["traces"], second["loads"]) == (0, 1)
    assert second["losses"] == first["losses"]
    # The issue asks for a load time well below the first compile: measured ~19 ms vs ~70 ms
    # here. Only the ordering is asserted (timings on a shared machine are noisy; the numbers
    # belong in the note, not in a test).
    assert second["load"] < first["compile"], (first, second)

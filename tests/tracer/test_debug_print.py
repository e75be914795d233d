"""``dualflow.debug.print`` shows values from inside a compiled step at every call, with that
call's values, exactly once per call (guards failing and eager fallbacks included), while a plain
``print`` of a tensor fails the trace closed and the warning points at debug.print (issue 13,
hole 12)."""

from __future__ import annotations

import pytest

import dualflow
from dualflow import nn, ops, optim


def test_prints_every_call_with_its_values(capsys: pytest.CaptureFixture[str]) -> None:
    @dualflow.compile
    def f(x):
        y = x * 2
        dualflow.debug.print("sum={s:.1f} first={}", y[0], s=y.sum())
        if y.sum() > 0:  # a guard: some calls fail it and fall back to eager
            return y
        return -y

    for v in ([1.0, 2.0], [3.0, 4.0], [-1.0, -2.0], [5.0, 1.0], [-2.0, -2.0]):
        f(dualflow.tensor(v))
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "sum=6.0 first=2.0",
        "sum=14.0 first=6.0",
        "sum=-6.0 first=-2.0",
        "sum=12.0 first=10.0",
        "sum=-8.0 first=-4.0",
    ]
    assert f.stats().plan_runs >= 3


def _logged_training(mode: str) -> None:
    dualflow.random.seed(0)
    model = nn.Linear(2, 1)
    opt = optim.SGD(list(model.params()), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        dualflow.debug.print("loss {:.6f} grad {}", loss, model.weight.grad)
        opt.step()
        return loss

    run = dualflow.compile(step) if mode == "compiled" else step
    for i in range(4):
        run(dualflow.tensor([[1.0, float(i)]]))


def test_in_a_training_step_it_matches_eager(capsys: pytest.CaptureFixture[str]) -> None:
    outputs = {}
    for mode in ("eager", "compiled"):
        _logged_training(mode)
        outputs[mode] = capsys.readouterr().out
    assert outputs["compiled"] == outputs["eager"] and outputs["eager"].count("\n") == 4


def test_plain_print_of_a_tensor_fails_closed_and_suggests_debug_print() -> None:
    def f(x):
        y = ops.tanh(x)
        print(y)
        return y

    with pytest.warns(RuntimeWarning, match=r"dualflow\.debug\.print"):
        dualflow.compile(f)(dualflow.tensor([1.0]))


def test_print_like_calls_print_their_values(capsys) -> None:
    """``dualflow.debug.print(t)`` and ``debug.print("y", t)`` mean what ``print`` means
    (issue 35: one tensor as the format failed the trace closed)."""
    compiled = dualflow.compile(
        lambda x: (dualflow.debug.print(x * 2), dualflow.debug.print("s", x.sum()), x)[2]
    )
    for i in range(3):
        compiled(dualflow.tensor([1.0, float(i)]))
    assert capsys.readouterr().out.splitlines() == [
        "[2. 0.]",
        "s 1.0",
        "[2. 2.]",
        "s 2.0",
        "[2. 4.]",
        "s 3.0",
    ]
    assert compiled.stats().plan_runs == 2

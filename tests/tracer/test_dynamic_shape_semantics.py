"""Dynamic shapes (issue 39): where a size changes what a program means, compiled equals eager.

BatchNorm in training at batch 1 (PyTorch raises with one value per channel), ``reshape(-1, 16)``
of sizes divisible by 16 or not (the eager error, and no state written), Python ints from shapes
as a divisor and in ``arange``, a branch on ``x.shape[0] > 8`` (both sides), and the README
tour's uneven last batch. Each holds today (a trace per size) and must hold with symbolic
dimensions, whose guards (``s0 > 1``, divisibility, the comparison) decide these cases.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.data import load_digits
from dualflow.errors import ShapeError
from dualflow.nn import functional as F
from tests.tracer.helpers import arrays_of, assert_same

pytestmark = pytest.mark.filterwarnings("ignore:dualflow.compile. :RuntimeWarning")


def _outcome(fn, *args) -> tuple[str, object]:
    # ("ok", the result's arrays) or ("error", (type, message: the user's line too)): what it did
    try:
        out = fn(*args)
    except Exception as exc:
        return "error", (type(exc), str(exc))
    return "ok", [a.copy() for a in arrays_of(out)]


def _same_outcomes(fn, calls: list[tuple], **compile_kwargs) -> dualflow.tracer.CompiledFunction:
    compiled = dualflow.compile(fn, **compile_kwargs)
    for args in calls:
        want, got = _outcome(fn, *args), _outcome(compiled, *args)
        assert want[0] == got[0], (args[0].shape, want, got)
        if want[0] == "error":
            assert got[1] == want[1]
        else:
            assert_same(got[1], want[1], msg=str(args[0].shape))
    return compiled


def _bn_step(spatial: tuple[int, ...]):
    dualflow.random.seed(0)
    if spatial:
        model = nn.Sequential(nn.Conv2d(4, 6, 1), nn.BatchNorm2d(6))
    else:
        model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.BatchNorm1d(6))
    opt = optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        h = model(x)
        loss = ((h.reshape(h.shape[0], -1).mean(1) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return step, model


@pytest.mark.parametrize("passes", ["exact", None])
@pytest.mark.parametrize("spatial", [(), (1, 1), (2, 2)])
def test_training_batch_norm_at_batch_one_raises_as_eagerly(spatial, passes) -> None:
    # one value per channel (batch 1, no or 1x1 spatial) raises, as in PyTorch; 2x2 does not
    rng = np.random.default_rng(0)
    sizes = [4, 8, 1, 5, 1, 2, 4]
    calls = [
        (
            dualflow.tensor(rng.standard_normal((n, 4, *spatial), dtype=np.float32)),
            dualflow.tensor(rng.standard_normal(n, dtype=np.float32)),
        )
        for n in sizes
    ]
    states, outcomes = [], []
    for compiled in (False, True):
        step, model = _bn_step(spatial)
        fn = dualflow.compile(step, passes=passes) if compiled else step
        outcomes.append([_outcome(fn, *args)[0] for args in calls])
        states.append({k: v.numpy().copy() for k, v in model.state_dict().items()})
    raises = spatial != (2, 2)
    assert outcomes[0] == ["error" if n == 1 and raises else "ok" for n in sizes]
    assert outcomes[1] == outcomes[0]
    # a failing compiled call is all or nothing: it counts no batch (eager, like PyTorch's
    # BatchNorm, counts it before the error); every other value is eager's
    (key,) = [k for k in states[0] if k.endswith("num_batches_tracked")]
    assert int(states[1].pop(key)) == outcomes[1].count("ok")
    del states[0][key]
    assert_same(states[1], states[0], msg="parameters and running statistics")


def test_eval_batch_norm_at_batch_one_equals_eager() -> None:
    dualflow.random.seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6)).eval()
    rng = np.random.default_rng(1)
    calls = [(dualflow.tensor(rng.standard_normal((n, 4), dtype=np.float32)),) for n in (3, 1, 7)]
    _same_outcomes(model, calls)


def test_reshape_minus_one_by_16_errors_exactly_as_eager() -> None:
    def fn(x):
        return (x.reshape(-1, 16) * 2.0).sum(1)

    rng = np.random.default_rng(2)
    sizes = [8, 12, 6, 4, 20, 10, 16, 6]  # x is (n, 4): divisible by 16 when n % 4 == 0
    calls = [(dualflow.tensor(rng.standard_normal((n, 4), dtype=np.float32)),) for n in sizes]
    compiled = _same_outcomes(fn, calls, passes="exact")
    with pytest.raises(ShapeError, match=r"reshape: cannot reshape \(6, 4\) into \(-1, 16\)"):
        compiled(calls[2][0])


def test_reshape_error_leaves_the_step_state_untouched() -> None:
    dualflow.random.seed(0)
    lin = nn.Linear(16, 2)
    opt = optim.SGD(lin.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = lin(x.reshape(-1, 16)).sum()
        loss.backward()
        opt.step()
        return loss

    fn = dualflow.compile(step)
    fn(dualflow.ones(8, 4))
    fn(dualflow.ones(12, 4))
    before = [p.numpy().copy() for p in lin.parameters()]
    with pytest.raises(ShapeError, match="reshape"):
        fn(dualflow.ones(6, 4))
    assert_same([p.numpy() for p in lin.parameters()], before)


def _shape_ints(x):
    # x.shape[0], len(x), x.size(1) and numel() flowing into ops: divisors, arange, reshape
    mean = x.sum(0) / x.shape[0]
    weights = dualflow.arange(x.shape[0]).float().reshape(len(x), 1) / x.size(1)
    return mean, (x * weights).reshape(-1).sum() / x.numel()


@pytest.mark.parametrize("passes", ["exact", None])
def test_shape_ints_as_divisors_and_in_arange(passes) -> None:
    rng = np.random.default_rng(3)
    sizes = [3, 7, 1, 12, 5, 7, 3]
    calls = [(dualflow.tensor(rng.standard_normal((n, 5), dtype=np.float32)),) for n in sizes]
    compiled = _same_outcomes(_shape_ints, calls, passes=passes)
    assert compiled.stats().calls == len(sizes)


def _branch(x):
    if x.shape[0] > 8:
        return (x * 2.0).sum(0)
    return (x - 1.0).amax(0)


@pytest.mark.parametrize("passes", ["exact", None])
def test_branch_on_a_size_takes_both_sides_as_eagerly(passes) -> None:
    rng = np.random.default_rng(4)
    sizes = [4, 12, 6, 16, 8, 9, 1, 30, 4]  # 8 is the last size of the small side
    calls = [(dualflow.tensor(rng.standard_normal((n, 3), dtype=np.float32)),) for n in sizes]
    compiled = _same_outcomes(_branch, calls, passes=passes)
    assert compiled.stats().plan_runs >= 1  # 4 again: a plan (today's or a symbolic one)


def _tour(compiled: bool) -> tuple[list[float], list[np.ndarray], object]:
    # the README's tour: batches of 64 over 1438 digits, so each epoch ends with 30 images
    dualflow.random.seed(0)
    images, labels = load_digits("train")
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = optim.SGD(list(model.params()), lr=0.5)

    def train_step(x, t):
        optimizer.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), t)
        loss.backward()
        optimizer.step()
        return loss

    step = dualflow.compile(train_step) if compiled else train_step
    losses = []
    for _ in range(3):
        for i in range(0, len(images), 64):
            x, t = dualflow.tensor(images[i : i + 64]), dualflow.tensor(labels[i : i + 64])
            losses.append(float(step(x, t).item()))
    return losses, [p.numpy().copy() for p in model.params()], step


def test_uneven_last_batch_of_the_readme_tour() -> None:
    eager_losses, eager_params, _ = _tour(compiled=False)
    losses, params, step = _tour(compiled=True)
    assert losses == eager_losses and len(losses) == 3 * 23
    assert_same(params, eager_params)
    stats = step.stats()
    # the last batch's size: one retrace (to a symbolic batch once issue 39 lands), then plans
    assert stats.traces == 2 and stats.plan_runs == len(losses) - 2, stats
    assert stats.retrace_reasons[1] == "x.shape[0]: 64 -> 30"


def test_cross_entropy_mean_over_a_changing_batch_equals_eager() -> None:
    # the loss's normaliser is the batch size: a symbolic divisor must be each call's own
    def loss(logits, target):
        return F.cross_entropy(logits, target) * 1.0

    rng = np.random.default_rng(5)
    calls = [
        (
            dualflow.tensor(rng.standard_normal((n, 4), dtype=np.float32)),
            dualflow.tensor(rng.integers(0, 4, n)),
        )
        for n in (2, 9, 2, 5, 1)
    ]
    _same_outcomes(loss, calls, passes="exact")

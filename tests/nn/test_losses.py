"""Loss functions and modules beyond the PyTorch table: typed errors naming the loss, the shapes or
dtypes and the user's line; modules' options and state dicts; compiled training with a loss
module built outside the compiled step equals eager.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import nn, optim
from dualflow.errors import DTypeError, ShapeError
from dualflow.nn import functional as F

LOGITS = dualflow.tensor(np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32))
LABELS = dualflow.tensor([0, 2, 1, 1])


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda: F.cross_entropy(LOGITS, LABELS + 3), ShapeError, r"labels must lie in \[0, 3\)"),
        (
            lambda: F.cross_entropy(LOGITS, LABELS + 3, weight=dualflow.ops.ones(3)),
            ShapeError,
            r"cross_entropy: target labels must lie in \[0, 3\) or equal ignore_index=-100",
        ),
        (
            lambda: F.cross_entropy(LOGITS, LABELS[:2]),
            ShapeError,
            r"cross_entropy: input of shape \(4, 3\).*target of shape \(4,\), got \(2,\)",
        ),
        (
            lambda: F.cross_entropy(LOGITS, LABELS.bool()),
            DTypeError,
            "cross_entropy: target must hold class indices",
        ),
        (lambda: F.cross_entropy(LOGITS.long(), LABELS), DTypeError, "cross_entropy: input"),
        (
            lambda: F.cross_entropy(LOGITS, LABELS, weight=dualflow.ops.ones(4)),
            ShapeError,
            r"weight must have shape \(3,\)",
        ),
        (
            lambda: F.nll_loss(LOGITS, LABELS.float()),
            DTypeError,
            "nll_loss: target must hold class indices",
        ),
        (
            lambda: F.mse_loss(LOGITS, LOGITS[0]),
            ShapeError,
            r"mse_loss: target of shape \(3,\) must have the input's shape \(4, 3\)",
        ),
        (
            lambda: F.binary_cross_entropy(LOGITS.sigmoid(), LABELS),
            DTypeError,
            "binary_cross_entropy: target must be floating point",
        ),
        (
            lambda: F.binary_cross_entropy_with_logits(LOGITS, LOGITS[:2]),
            ShapeError,
            "binary_cross_entropy_with_logits: target",
        ),
        (
            lambda: F.l1_loss(LOGITS, LOGITS, reduction="avg"),
            ValueError,
            "'avg' is not a valid value for reduction",
        ),
    ],
)
def test_bad_input_gets_a_typed_error_naming_the_loss_and_the_line(call, error, pattern) -> None:
    with pytest.raises(error, match=pattern) as info:
        call()
    assert "test_losses.py" in str(info.value)


def test_modules_keep_options_and_weights_as_buffers() -> None:
    loss = nn.CrossEntropyLoss(weight=dualflow.tensor([1.0, 2.0, 3.0]), ignore_index=1)
    assert list(loss.state_dict()) == ["weight"] and loss.ignore_index == 1
    assert list(nn.MSELoss().state_dict()) == []
    assert nn.L1Loss(size_average=False).reduction == "sum"  # PyTorch's legacy flags
    assert nn.NLLLoss(reduce=False).reduction == "none"
    with pytest.raises(ValueError, match="batchmean"):
        nn.MSELoss(reduction="batchmean")


def test_compiled_training_step_with_a_loss_module_equals_eager() -> None:
    rng = np.random.default_rng(1)
    batches = [
        (rng.normal(size=(6, 4)).astype(np.float32), rng.integers(0, 3, 6)) for _ in range(4)
    ]
    results = []
    for compiled in (False, True):
        dualflow.random.seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        criterion = nn.CrossEntropyLoss(
            label_smoothing=0.1, weight=dualflow.tensor([1.0, 2.0, 0.5])
        )
        opt = optim.SGD(list(model.params()), lr=0.1)

        def step(x, t, model=model, criterion=criterion, opt=opt):
            opt.zero_grad()
            loss = criterion(model(x), t)
            loss.backward()
            opt.step()
            return loss

        fn = dualflow.compile(step, fallback="error") if compiled else step
        losses = [float(fn(dualflow.tensor(x), dualflow.tensor(t))) for x, t in batches]
        results.append((losses, [p.numpy().copy() for p in model.params()]))
    (eager_losses, eager_params), (losses, params) = results
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    for got, want in zip(params, eager_params):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

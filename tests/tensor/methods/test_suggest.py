"""Every public namespace's AttributeError names the closest dualflow equivalent: the
namespace's hint, PyTorch's other spelling (``RENAMES``), or a close match (a typo)."""

from __future__ import annotations

import pytest

import dualflow
import dualflow.nn.functional as F
from dualflow import nn, optim
from dualflow.nn import init
from dualflow.tensor.methods.suggest import NN_RENAMES, RENAMES, TORCH_RENAMES

X = dualflow.ones(2)


@pytest.mark.parametrize(
    ("get", "match"),
    [
        (lambda: dualflow.absolute, r"use dualflow\.abs \(dualflow's name for torch\.absolute\)"),
        (lambda: dualflow.inference_mode, r"use dualflow\.no_grad"),
        (lambda: dualflow.zeross, r"did you mean 'zeros'\?"),
        (lambda: dualflow.median, r"PyTorch's torch\.median is not in dualflow"),
        (lambda: dualflow.backends, r"no backend switches"),
        (lambda: nn.Linaer, r"did you mean 'Linear'\?"),
        (lambda: nn.ReLU6, r"nn\.functional\.relu6"),
        (lambda: nn.SyncBatchNorm, r"per-process statistics"),
        (lambda: F.softmx, r"did you mean 'softmax'\?"),
        (lambda: F.grid_sample, r"interpolate"),
        (lambda: init.xavier_normal, r"did you mean 'xavier_normal_'\?"),
        (lambda: init.kaiming_uniform, r"did you mean 'kaiming_uniform_'\?"),
        (lambda: optim.Adamw, r"did you mean 'AdamW'\?"),
        (lambda: optim.SDG, r"did you mean 'SGD'\?"),
        (lambda: X.trasnpose, r"did you mean 'transpose'\?"),
        (lambda: X.clamp_min, r"use clamp"),
        (lambda: X.median, r"x\.sort\(dim\)"),
        (lambda: nn.utils.clip_grad_norm, r"use clip_grad_norm_"),
        (lambda: nn.utils.clip_grad_valu_, r"did you mean 'clip_grad_value_'\?"),
    ],
)
def test_missing_names_say_what_to_use(get, match) -> None:
    with pytest.raises(AttributeError, match=match):
        get()


def test_unrelated_names_get_no_suggestion_and_dunders_stay_plain() -> None:
    with pytest.raises(AttributeError, match=r"has no attribute 'no_such_method'$"):
        _ = X.no_such_method
    with pytest.raises(AttributeError, match=r"'qwertyuiop'$"):
        _ = dualflow.qwertyuiop
    assert not hasattr(dualflow, "__wrapped__") and not hasattr(nn, "__wrapped__")


def _exists(path: str) -> bool:
    head = path.split(" ")[0].split("(")[0]
    root, *rest = head.split(".")
    target = {"dualflow": dualflow, "nn": nn}.get(root)
    if target is None:  # a Tensor method name
        return hasattr(X, root)
    for part in rest:
        if not hasattr(target, part):
            return False
        target = getattr(target, part)
    return True


@pytest.mark.parametrize("table", [RENAMES, TORCH_RENAMES, NN_RENAMES])
def test_every_rename_points_at_a_name_dualflow_has(table) -> None:
    targets = {name: to for name, to in table.items() if to[0].isalpha() and "<" not in to}
    broken = {name: to for name, to in targets.items() if not _exists(to)}
    assert not broken


def test_the_error_pickles_with_its_text() -> None:
    import pickle

    try:
        _ = X.trasnpose
    except AttributeError as error:
        copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is AttributeError and "did you mean 'transpose'" in str(copy)

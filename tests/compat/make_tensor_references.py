"""Generate ``tensor_references.npz``, ``functional_references.npz`` and ``loss_references.npz``
with PyTorch (run once, by hand; torch is not a dependency of dualflow):

    /work/torchvenv/bin/python tests/compat/make_tensor_references.py [FAMILY ...]

(FAMILY: tensor, functional, loss, apiops, ported, cumulative, pyops; default all. Name only the
families whose cases changed, so the other reference files stay byte-identical.)

For each case: its inputs, outputs (values and dtypes), the cotangents and the gradients of
``sum(output * cotangent)`` with respect to the inputs that require grad, or the error torch
raised. Inputs are float64 unless a case says otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from tests.compat import (  # noqa: E402
    apiops_cases,
    cumulative_cases,
    functional_cases,
    loss_cases,
    ported_cases,
    pyops_cases,
    tensor_cases,
    tensor_packing,
)
from tests.compat.tensor_harness import (  # noqa: E402
    cotangent,
    flatten,
    is_tensor,
    rng_for,
    to_numpy,
)

TORCH = SimpleNamespace(
    F=torch.nn.functional,
    nn=torch.nn,
    float32=torch.float32,
    float64=torch.float64,
    long=torch.long,
    torch=torch,
)


def run_case(case, store: dict[str, np.ndarray]) -> None:
    prefix = case.id + "/"
    values = case.inputs(rng_for(case.id))
    wrt = case.grad_positions(values)
    args, leaves = [], {}
    for i, value in enumerate(values):
        if isinstance(value, np.ndarray):
            store[prefix + f"input/{i}"] = value
            t = torch.from_numpy(value.copy())
            if i in wrt:
                t.requires_grad_()
                leaves[i] = t
            value = t
        args.append(value)
    try:
        outs = flatten(case.fn(TORCH, *args))
    except Exception as exc:  # the reference says: this call raises
        store[prefix + "error"] = np.array(f"{type(exc).__name__}: {exc}")
        return
    loss = None
    for k, out in enumerate(outs):
        store[prefix + f"out/{k}"] = to_numpy(out)
        if is_tensor(out) and out.requires_grad:
            cot = cotangent(case.id, k, tuple(out.shape))
            store[prefix + f"cot/{k}"] = cot
            term = (out * torch.from_numpy(cot).to(out.dtype)).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    for i, t in leaves.items():
        grad = t.grad if t.grad is not None else torch.zeros_like(t)
        store[prefix + f"grad/{i}"] = grad.numpy()


def main() -> None:
    families = {
        "tensor": tensor_cases,
        "functional": functional_cases,
        "loss": loss_cases,
        "apiops": apiops_cases,
        "ported": ported_cases,
        "cumulative": cumulative_cases,
        "pyops": pyops_cases,
    }
    chosen = sys.argv[1:] or list(families)
    for name in chosen:
        module = families[name]
        ids = [case.id for case in module.CASES]
        assert len(ids) == len(set(ids)), "case ids must be unique"
        store: dict[str, np.ndarray] = {}
        for case in module.CASES:
            run_case(case, store)
        tensor_packing.save(HERE / f"{name}_references.npz", store)
        errors = sum(k.endswith("/error") for k in store)
        print(f"{name}: {len(module.CASES)} cases ({errors} raise), torch {torch.__version__}")


if __name__ == "__main__":
    main()

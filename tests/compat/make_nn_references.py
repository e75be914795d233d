"""Generate ``nn_references.npz`` with PyTorch (run once, by hand; torch is not a dependency).

    /work/torchvenv/bin/python tests/compat/make_nn_references.py

For each case of ``nn_cases.CASES``: the initial state dict (with PyTorch's key order), the inputs,
output cotangents, the outputs, the gradients of ``sum(output * cotangent)`` with respect to the
parameters and the float inputs, and the buffers after the forward (running statistics).
Everything runs in float64. Also the tied-weights state dict keys.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import nn_packing  # noqa: E402
from nn_cases import CASES, tied  # noqa: E402


def to_torch(value, grads):
    if isinstance(value, tuple):
        return tuple(to_torch(v, grads) for v in value)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        t = torch.from_numpy(value.copy()).requires_grad_()
        grads.append(t)
        return t
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    return value


def flatten(out):
    if isinstance(out, tuple | list):
        return [t for o in out for t in flatten(o)]
    return [] if out is None else [out]


def run_case(case, rng, store):
    torch.manual_seed(0)
    module = case.build(torch.nn).double()
    module.train(case.train)
    if case.hooks is not None:
        case.hooks(module)
    prefix = case.id + "/"
    init = {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}
    store[prefix + "keys"] = np.array(list(init))
    for k, v in init.items():
        store[prefix + "init/" + k] = v
    args, kwargs = case.inputs(rng)
    inputs: list = []
    targs = [to_torch(a, inputs) for a in args]
    tkwargs = {k: to_torch(v, []) for k, v in kwargs.items()}
    for k, v in kwargs.items():
        store[prefix + "kwarg/" + k] = np.asarray(v)
    for i, t in enumerate(inputs):
        store[prefix + f"input/{i}"] = t.detach().numpy()
    outs = flatten(module(*targs, **tkwargs))
    loss = 0
    for i, out in enumerate(outs):
        cot = rng.standard_normal(tuple(out.shape))
        store[prefix + f"cotangent/{i}"] = cot
        store[prefix + f"output/{i}"] = out.detach().numpy()
        loss = loss + (out * torch.from_numpy(cot)).sum()
    loss.backward()
    for name, p in module.named_parameters():
        store[prefix + "grad/" + name] = p.grad.numpy()
    for i, t in enumerate(inputs):
        store[prefix + f"input_grad/{i}"] = t.grad.numpy()
    params = dict(module.named_parameters())
    for k, v in module.state_dict().items():
        if k not in params:  # buffers (running statistics) the forward may have changed
            store[prefix + "after/" + k] = v.detach().numpy().copy()


def main() -> None:
    torch.set_default_dtype(torch.float64)
    store: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(1234)
    for case in CASES:
        run_case(case, rng, store)
    store["tied/keys"] = np.array(list(tied(torch.nn).state_dict()))
    nn_packing.save(HERE / "nn_references.npz", store)
    print(f"wrote {len(store)} arrays for {len(CASES)} cases with torch {torch.__version__}")


if __name__ == "__main__":
    main()

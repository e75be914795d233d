"""Generate ``optim_references.npz`` and ``sched_references.npz`` with PyTorch (run by hand).

    /work/torchvenv/bin/python tests/compat/make_optim_references.py [optim] [sched] [lbfgs]

(names limit it to those files). LBFGS (``lbfgs_cases``): parameters and losses after every
``step(closure)``, closure calls and state counts, float64.

Optimizers (``optim_cases``): parameters and state after every step, in float64 (with torch's
default dtype float64, so step counts and NAdam's ``mu_product`` are float64 as dualflow's) and
float32. Schedulers (``sched_cases``): every group's lr (and momentum) after every step, and for
``STATE_CASES`` the state dict (JSON) after ``STATE_AT`` steps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import lbfgs_cases  # noqa: E402
import nn_packing  # noqa: E402
import optim_cases  # noqa: E402
import sched_cases  # noqa: E402


def run_optimizer(name: str, kwargs: dict, dtype: str, store: dict) -> None:
    torch.set_default_dtype(torch.float64 if dtype == "float64" else torch.float32)
    params0, grads = optim_cases.problem(dtype)
    params = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in params0]
    opt = getattr(torch.optim, name)(params, foreach=False, **kwargs)
    prefix = f"{optim_cases.case_id(name, kwargs)}/{dtype}/"
    for step, step_grads in enumerate(grads):
        for p, g in zip(params, step_grads):
            p.grad = torch.from_numpy(g.copy())
        opt.step()
        for i, p in enumerate(params):
            store[prefix + f"param{i}/step{step}"] = p.detach().numpy().copy()
    for i, p in enumerate(params):
        for key, value in opt.state[p].items():
            store[prefix + f"state{i}/{key}"] = np.asarray(value.detach().numpy())


def make_optimizer(kind: str):
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))
    groups = [{"params": [a]}, {"params": [b], "lr": 0.5}]
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=1.0, momentum=0.9)
    return torch.optim.Adam(groups, lr=1.0)


def snapshot(sched, opt) -> list[float]:
    momenta = [g["momentum"] if "momentum" in g else g["betas"][0] for g in opt.param_groups]
    return [float(v) for v in sched.get_last_lr()] + [float(m) for m in momenta]


def advance(case, sched, opt, epoch: int) -> None:
    opt.step()
    if case.kind == "plateau":
        sched.step(sched_cases.METRICS[epoch])
    elif case.kind == "epochs":
        sched.step(sched_cases.FRACTIONAL_EPOCHS[epoch - 1])
    else:
        sched.step()


def run_scheduler(case, store: dict) -> None:
    torch.set_default_dtype(torch.float64)
    opt = make_optimizer(case.optimizer)
    for group in opt.param_groups:
        for p in group["params"]:
            p.grad = torch.zeros_like(p)
    sched = case.build(torch.optim.lr_scheduler, opt)
    rows = [snapshot(sched, opt)]
    for epoch in range(1, sched_cases.EPOCHS):
        advance(case, sched, opt, epoch)
        rows.append(snapshot(sched, opt))
        if case.id in sched_cases.STATE_CASES and epoch == sched_cases.STATE_AT:
            store[case.id + "/state"] = np.array(json.dumps(sched.state_dict()))
    store[case.id + "/lrs"] = np.array(rows)


def make_lbfgs_references() -> None:
    torch.set_default_dtype(torch.float64)
    store: dict[str, np.ndarray] = {}
    for problem, kwargs in lbfgs_cases.CASES:
        prefix = lbfgs_cases.case_id(problem, kwargs) + "/"

        def parameter(value: np.ndarray) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.from_numpy(value.copy()))

        out = lbfgs_cases.run(torch, torch.optim, parameter, problem, kwargs)
        store.update({prefix + k: v for k, v in out.items()})
    nn_packing.save(HERE / "lbfgs_references.npz", store)
    print(f"wrote {len(store)} LBFGS arrays, torch {torch.__version__}")


def main() -> None:
    wanted = set(sys.argv[1:]) or {"optim", "sched", "lbfgs"}
    if "optim" in wanted:
        optim: dict[str, np.ndarray] = {}
        for name, kwargs in optim_cases.CASES:
            for dtype in ("float64", "float32"):
                run_optimizer(name, kwargs, dtype, optim)
        nn_packing.save(HERE / "optim_references.npz", optim)
        print(f"wrote {len(optim)} optimizer arrays, torch {torch.__version__}")
    if "sched" in wanted:
        sched: dict[str, np.ndarray] = {}
        for case in sched_cases.CASES:
            run_scheduler(case, sched)
        nn_packing.save(HERE / "sched_references.npz", sched)
        print(f"wrote {len(sched)} scheduler arrays, torch {torch.__version__}")
    if "lbfgs" in wanted:
        make_lbfgs_references()


if __name__ == "__main__":
    main()

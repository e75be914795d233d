"""Rebuild a ``Trace`` from a stored plan-cache entry, bound to this process's objects.

Every stored access path is followed from the call's roots (``state_paths``); the caller then
runs the usual state checks, so an entry is used only when each captured tensor is found with
the stored shape, dtype, device and requires-grad.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dualflow.device import Device
from dualflow.graph_ir.ir import Graph
from dualflow.passes.manager import PassStats
from dualflow.tensor.core import Tensor
from dualflow.tracer.autodiff import Backward, backward_op
from dualflow.tracer.env_cache import canonical, decode_guards, fingerprint
from dualflow.tracer.env_guards import is_versioned
from dualflow.tracer.pipeline import build_plan
from dualflow.tracer.state import StateChecks, StateRef, plan_device
from dualflow.tracer.state_paths import UnreachableState, format_path, resolve
from dualflow.tracer.trace import Trace


def _tensor(roots: dict, path: list) -> Tensor:
    found = resolve(roots, path)
    if not isinstance(found, Tensor):
        raise UnreachableState(f"{format_path(path)} is a {type(found).__name__}, not a Tensor")
    return found


def _ref(record: dict[str, Any], roots: dict) -> StateRef:
    return StateRef(
        record["kind"],
        _tensor(roots, record["path"]),
        tuple(record["shape"]),
        np.dtype(record["dtype"]),
        record["device"],
        record["name"],
        record["requires_grad"],
    )


def _checks(meta: dict[str, Any], roots: dict, fn: Any, objects: dict[str, Any]) -> StateChecks:
    modules = []
    for (path, training), stored in zip(meta["modules"], meta["fingerprints"]):
        module = resolve(roots, path)
        if not is_versioned(module):
            raise UnreachableState(f"{format_path(path)} is not a Module or Optimizer now")
        if canonical(fingerprint(module)) != canonical(stored):  # other layers or settings
            raise UnreachableState(f"{format_path(path)} is configured differently now")
        modules.append((module, module._version, training))
    return StateChecks(
        refs=[_ref(r, roots) for r in meta["refs"]],
        empty_grads=[(_tensor(roots, path), name) for path, name in meta["empty_grads"]],
        empty_input_grads=list(meta["empty_input_grads"]),
        modules=modules,
        env=decode_guards(meta["env"], fn, objects),
    )


def _slot(record: list[Any], roots: dict) -> tuple[str, Any]:
    kind, where = record
    return (kind, where if kind == "input" else _tensor(roots, where))


def _backward(
    meta: dict[str, Any], forward: Graph, graph: Graph, roots: dict, device: Device, debug: bool
) -> Backward:
    record = meta["backward"]
    n = record["n_residuals"]
    residuals = list(forward.outputs[len(forward.outputs) - n :]) if n else []
    return Backward(
        graph,
        build_plan(graph, (), device, debug=debug)[1],
        StateChecks(refs=[_ref(r, roots) for r in record["refs"]]),
        residuals,
        list(record["input_positions"]),
        list(record["state_slots"]),
        list(record["grad_outputs"]),
        backward_op(forward.name, record["mask"], meta["n_outputs"]),
        list(record["mask"]),
    )


def load_trace(
    meta: dict[str, Any],
    forward: Graph,
    backward: Graph | None,
    roots: dict,
    leaves: list[Any],
    described: list[tuple[str, Any]],
    debug: bool = False,
    fn: Any = None,
    objects: dict[str, Any] | None = None,
) -> Trace:
    """A ready-to-run Trace from a stored entry; raises ``UnreachableState`` if unbound.

    The memory plan and kernels are lowered again from the stored graph (fused kernels come
    from the kernel cache on disk), which is what makes loading cheap next to tracing + passes.
    """
    checks = _checks(meta, roots, fn, objects or {})
    device = plan_device(leaves, checks.refs)
    bwd = None if backward is None else _backward(meta, forward, backward, roots, device, debug)
    trace = Trace(
        forward,
        build_plan(forward, (), device, debug=debug, donate=True)[1],
        checks,
        list(meta["update_slots"]),
        [_slot(s, roots) for s in meta["grad_owners"]],
        [_slot(s, roots) for s in meta["grads_to_none"]],
        meta["structure"],  # a TreeDef: plan_cache decoded and checked it
        meta["n_outputs"],
        described,
        "loaded from the plan cache",
        0.0,
        bwd,
    )
    trace.input_updates = list(meta["input_updates"])
    trace.const_outputs = list(meta["const_outputs"])
    trace.pass_stats = [PassStats(*values) for values in meta["pass_stats"]]
    trace.leaf_index = list(meta["leaf_index"])
    trace.released_outputs = list(meta["released_outputs"])
    trace.commits = bool(meta["commits"])
    return trace

"""The end of a tracing run's view of the Python environment: guards, side effects, aliasing.

``finish_environment`` turns what the probe recorded into the trace's environment guards, the
Replay of its side effects, and the argument/state aliasing it was traced with; anything a plan
could not reproduce fails the trace closed (``tracer.fail_closed``).
"""

from __future__ import annotations

from typing import Any

from dualflow.tensor.core import Tensor
from dualflow.tracer.interpreter import TracingInterpreter
from dualflow.tracer.side_effects import NotReplayable, Replay, ReplayBuilder


def finish_environment(
    tracer: TracingInterpreter, outputs: list[Tensor], leaves: list[Any]
) -> Replay:
    """Guards and replay of one tracing run; ``outputs`` grows by the tensors side effects store.

    A numpy array of the environment changed in place, or a change that cannot be replayed,
    makes the trace unusable (``tracer.failure``).
    """
    env = tracer.env
    for label in env.arrays_changed():
        tracer.fail_closed(
            f"the compiled function modifies the numpy array {label} in place: a graph reads "
            "it but cannot replay numpy writes. Keep it in a dualflow tensor and update it with "
            "dualflow.ops.assign, or change it outside the compiled function"
        )
    try:
        replay = ReplayBuilder(env, tracer, outputs).build(env.changes())
    except NotReplayable as exc:
        message, line = exc.args if len(exc.args) == 2 else (exc.args[0], None)
        tracer.fail_closed(message, line)
        return Replay()
    tracer.checks.env = env.guards_made()
    tracer.checks.same_as_state = _arguments_that_are_state(tracer, leaves)
    replay.actions += tracer.module_reads.replay_actions()  # train()/eval() inside the call
    return replay


def _arguments_that_are_state(
    tracer: TracingInterpreter, leaves: list[Any]
) -> list[tuple[int, Any, str]]:
    """Arguments that are also tensors the trace could reach as state (``f(w)`` where ``f``
    reads ``w`` itself): the trace read both as one value, so it is kept for that tensor only."""
    owned: dict[int, str] = {id(t): label for label, t in _reachable_tensors(tracer)}
    return [
        (i, leaf, owned[id(leaf)])
        for i, leaf in enumerate(leaves)
        if isinstance(leaf, Tensor) and id(leaf) in owned
    ]


def _reachable_tensors(tracer: TracingInterpreter) -> list[tuple[str, Tensor]]:
    found = [(tracer.env.known[i].label, t) for i, t in tracer.env.tensors.items()]
    for module in tracer.module_reads.seen.values():
        if hasattr(module, "named_params") and hasattr(module, "named_buffers"):
            found += [(n, t) for n, t in (*module.named_params(), *module.named_buffers())]
        for group in getattr(module, "param_groups", ()):
            found += [(type(module).__name__, p) for p in group["params"]]
        for entries in getattr(module, "state", {}).values():
            if isinstance(entries, dict):
                found += [(f"optimizer state {k}", t) for k, t in entries.items()]
    return [(label, t) for label, t in found if isinstance(t, Tensor)]

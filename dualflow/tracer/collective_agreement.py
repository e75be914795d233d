"""Compiled calls that issue collectives decide "run the plan or run eagerly" with every rank.

A rank whose call cannot use a plan (no trace for its arguments, a guard failed, ``max_traces``)
runs the function eagerly; its eager collectives (the optimizer's layout check, each bucket's
all-reduce) would pair with the other ranks' plan collectives and hang. So once a compiled
function has issued collectives, each of its calls votes once per communicator: a rank going eager
votes EAGER before it starts; a rank running a plan votes OK at the plan's first collective
(after its guards passed) with a digest of the plan's whole sequence of collectives. One EAGER vote
and every rank runs this call eagerly (the rank that needs a new trace traces it); all OK and the
plans' sequences must match (else ``CommunicatorError`` on every rank), and then run unchecked.
A rank whose call raises votes FAILED, so the others raise instead of waiting. A call that issued
collectives ends with a closing vote (before a plan's commit): a rank whose call raised after its
collectives votes FAILED there, so every rank raises in that same call instead of one committing
it and the other not (their parameters would then differ silently). The votes compare each rank's
count of committed optimizer steps too; plans count steps like eager runs (a tensor write).

Each ``CompiledFunction`` holds a ``CollectiveAgreement`` (its ``agreement``, the communicators its
calls issued collectives on kept inside): ``compiled.py`` calls its ``call``, ``run_plan`` and
``going_eager`` at its plan-or-retrace points (and ``before_commit`` where an eager run commits).
Until a call issues a collective the policy's steps are ``LocalAgreement``'s: nothing to vote on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from dualflow.distributed.agreement import EAGER, FAILED, KIND_CALL, OK, call_site
from dualflow.distributed.watchdog import write_stderr
from dualflow.errors import CommunicatorError
from dualflow.ops.collective import (
    COMMUNICATORS,
    collective_activity,
    reset_plan_call,
    set_plan_call,
)
from dualflow.ops.registry import OPS

EAGER_RUN = object()  # run_plan's answer when this call must run eagerly on every rank
_SHOWN = 3  # collectives of a plan named in a disagreement message


class LocalAgreement:
    """The call policy when there is no other rank to agree with: every step does nothing.

    A compiled function's calls run under it until one of them issues a collective (a single
    process never leaves it); ``CompiledFunction.agreement`` may also be set to it outright.

    Example:
        >>> policy = LocalAgreement()
        >>> policy.call(lambda: 1 + 1), policy.comms
        (2, frozenset())
    """

    comms: frozenset[int] = frozenset()  # no communicators seen

    def call(self, body: Callable[[], Any]) -> Any:
        """Run ``body()``, one whole call of the compiled function."""
        return body()

    def going_eager(self) -> None:
        """This call runs its Python now: nobody else needs to know."""

    def before_commit(self) -> None:
        """This call is about to commit: nobody else needs to know."""

    def run_plan(self, trace: Any, inputs: list, state: list) -> Any:
        """``trace.plan.run(inputs, state)``."""
        return trace.plan.run(inputs, state)


LOCAL = LocalAgreement()


@dataclass
class _Call:
    """One call of a compiled function that issues collectives: has it voted yet?"""

    policy: CollectiveAgreement
    comms: set[int]
    voted: bool = False
    agreed: set[int] = field(default_factory=set)  # communicators whose plan sequence is agreed
    closed: bool = False  # the closing vote (every rank got through the call) is done


@dataclass
class _PlanInfo:
    """What a trace's plan tells the other ranks, computed once per trace."""

    comms: set[int]
    text: str
    detail: str
    early: list[int]  # state slots the plan may write (donated) before its first collective


_CALL: ContextVar[_Call | None] = ContextVar("dualflow_compiled_call", default=None)


class _Fallback(Exception):
    """Raised inside a running plan at its first collective: another rank runs eagerly."""


def _name(fn: Any) -> str:
    """The compiled function's name as its graphs carry it: ``train.step``."""
    inner = getattr(fn, "fn", fn)
    name = getattr(inner, "__qualname__", None) or type(inner).__name__
    return name.replace(".<locals>.", ".").replace(" ", "_")


class CollectiveAgreement:
    """The call policy of compiled ``fn`` where ranks may run it: vote when it issues collectives.

    ``comms``: the communicators its calls issued collectives on (empty until one did; the
    calls run under ``LOCAL``'s steps till then).

    Example:
        >>> policy = CollectiveAgreement(None)
        >>> policy.call(lambda: 1 + 1), policy.comms
        (2, set())
        >>> policy.before_commit()  # no call of a function that issues collectives: nothing to do
    """

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.comms: set[int] = set()

    def call(self, body: Callable[[], Any]) -> Any:
        """Run ``body()``, one whole call of the compiled function, voting with the other ranks
        if needed. A function is known to issue collectives once one of its calls did (on every
        rank alike). A call that issued collectives closes with one more vote: a rank whose call
        raised after a collective votes failed there, so every rank raises in that same call."""
        if not self.comms:
            return self._first_calls(body)
        state = _Call(self, set(self.comms))
        token = _CALL.set(state)
        try:
            result = body()
            if state.voted and not state.closed:  # a plan run closed before its commit
                _close(state)
            return result
        except CommunicatorError:
            raise  # a disagreement: every rank already raises it
        except BaseException as exc:
            _tell_failure(state, exc)
            raise
        finally:
            _CALL.reset(token)

    def _first_calls(self, body: Callable[[], Any]) -> Any:
        """A call of a function not yet known to issue collectives: find out whether it does."""
        before = collective_activity()[0]
        try:
            result = body()
        except CommunicatorError:
            raise
        except BaseException as exc:
            if self._issued(before):  # a collective, then the failure
                _tell_failure(_Call(self, set(self.comms)), exc)
            raise
        if self._issued(before):
            _close(_Call(self, set(self.comms), voted=True))
        return result

    def _issued(self, before: int) -> bool:
        """Whether collectives ran since activity count ``before``; if so, remember on which."""
        count, last = collective_activity()
        if count == before:
            return False
        self.comms = {c for c, n in last.items() if n > before}
        return True

    def _current(self) -> _Call | None:
        """The running call of this policy's function, when it votes."""
        state = _CALL.get()
        return state if state is not None and state.policy is self else None

    def going_eager(self) -> None:
        """This call runs its Python now: every rank must run it eagerly too."""
        state = self._current()
        if state is not None and not state.voted:
            _vote(state, EAGER, f"compiled call of {_name(self.fn)}", "runs eagerly", state.comms)

    def run_plan(self, trace: Any, inputs: list, state: list) -> Any:
        """``trace.plan.run(inputs, state)``, or ``EAGER_RUN`` when every rank must run eagerly.

        The plan votes at its first collective; a plan without collectives votes after its
        guards. A fallback undoes the state writes the plan made before its first collective.
        """
        current = self._current()
        if current is None or current.voted:
            return LOCAL.run_plan(trace, inputs, state)
        info = _plan_info(trace)
        saved = [(slot, state[slot].copy()) for slot in info.early]
        token = set_plan_call(_PlanCall(current, info))
        try:
            result = trace.plan.run(inputs, state)
        except _Fallback:
            _restore(state, saved)
            return EAGER_RUN
        finally:
            reset_plan_call(token)
        # a plan without collectives (its guards passed) votes now, before anything is committed
        voted_eager = (
            result.failed_guard is None
            and not current.voted
            and _vote(current, OK, info.text, info.detail, info.comms) >= EAGER
        )
        if voted_eager:
            _restore(state, saved)
            return EAGER_RUN
        if result.failed_guard is None:
            self.before_commit()  # a rank that failed in its plan fails them all, before commit
        return result

    def before_commit(self) -> None:
        """This call is about to commit: hold its closing vote now, so a rank that failed
        makes every rank raise before any commits (a plan run calls it; so may an eager run that
        commits atomically at its end). Otherwise ``call`` holds the vote when the call returns.
        """
        current = self._current()
        if current is not None and current.voted and not current.closed:
            _close(current)


class _PlanCall:
    """Set while a plan runs: its first collective votes; later ones skip their own checks."""

    def __init__(self, current: _Call, info: _PlanInfo) -> None:
        self.current, self.info = current, info

    def agreed(self, comm_id: int) -> bool:
        current = self.current
        if not current.voted:
            top = _vote(current, OK, self.info.text, self.info.detail, self.info.comms)
            if top >= EAGER:
                raise _Fallback
            current.agreed = set(current.comms | self.info.comms)
        return comm_id in current.agreed


def _vote(state: _Call, flag: int, text: str, detail: str, comms: set[int]) -> int:
    """One check per communicator, in id order; the highest flag any rank voted."""
    state.voted = True
    site = call_site()
    top = OK
    for comm_id in sorted(state.comms | comms):
        comm = COMMUNICATORS.get(comm_id)
        if comm is not None:
            # the optimizer steps committed so far must match too, even when a rank votes
            # eager: a rank that skipped step(), or rolled back a failed call, would otherwise
            # run identical plans one update behind
            steps = f"after {getattr(comm, 'optimizer_steps', 0)} optimizer steps"
            top = max(top, comm.ledger.check(KIND_CALL, text, site, flag, detail, steps))
    return top


def _close(state: _Call) -> None:
    """The call's closing vote: every rank got through it (or one failed: all raise here)."""
    state.closed = True
    _vote(state, OK, f"end of compiled call of {_name(state.policy.fn)}", "", state.comms)


def _tell_failure(state: _Call, exc: BaseException) -> None:
    """This rank's call raised: let the other ranks raise too instead of waiting for it."""
    detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    state.voted = False  # a failure after voting still needs its own message
    try:
        _vote(state, FAILED, f"compiled call of {_name(state.policy.fn)}", detail, state.comms)
    except CommunicatorError as error:  # the others raise it; this rank raises its own
        write_stderr(f"[dualflow rank {_rank(state)}] told the other ranks: {error}\n")


def _rank(state: _Call) -> int | str:
    comm = next((COMMUNICATORS.get(c) for c in sorted(state.comms)), None)
    return "?" if comm is None else comm.rank


def _restore(state: list, saved: list[tuple[int, Any]]) -> None:
    for slot, array in saved:
        state[slot][...] = array


def _plan_info(trace: Any) -> _PlanInfo:
    info = getattr(trace, "_collective_info", None)
    if info is None:
        info = trace._collective_info = _describe_plan(trace)
    return info


def _describe_plan(trace: Any) -> _PlanInfo:
    nodes = trace.graph.nodes
    steps, comms, first = [], set(), len(nodes)
    for index, node in enumerate(nodes):
        op = OPS.get(node.op)
        if op is None or not op.collective or op.async_role == "wait":
            continue
        first = min(first, index)
        comms.add(node.attrs["comm"])
        (x,) = node.inputs
        dims = ",".join(str(d) for d in x.shape)
        bucket = node.attrs.get("bucket")
        # a blocking allreduce and a start are the same MPI call (Iallreduce)
        text = f"allreduce {node.attrs['reduction']} {x.dtype}[{dims}]"
        steps.append((text if bucket is None else f"{text} bucket {bucket}", node.loc))
    digest = hashlib.blake2b(repr([t for t, _ in steps]).encode(), digest_size=6).hexdigest()
    text = f"compiled call of {trace.graph.name}: plan of {len(steps)} collectives [{digest}]"
    shown = [f"{t} at {loc}" for t, loc in steps[:_SHOWN]]
    detail = ", ".join(shown) + (", ..." if len(steps) > _SHOWN else "") or "no collectives"
    return _PlanInfo(comms, text, detail, _early_writes(trace, first))


def _early_writes(trace: Any, first: int) -> list[int]:
    """Donated state slots whose new value is written before node ``first``."""
    graph, plan = trace.graph, trace.plan
    donated = set(plan.donated_slots)
    position = {id(node): i for i, node in enumerate(graph.nodes)}
    early = []
    for target, new in graph.updates:
        slot = graph.state.index(target)
        producer = graph.producers.get(new)
        if slot in donated and producer is not None and position[id(producer)] < first:
            early.append(slot)
    return early

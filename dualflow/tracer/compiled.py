"""``CompiledFunction``: the cache of traces of one function, and the call path through them.

A call looks up the traces for its argument signature, checks each one's captured state, runs
its plan, and commits state writes only if every guard passed. Otherwise it traces the call
again (running it eagerly, so the result is always right). After ``max_traces`` it stays eager
and warns once, naming the reason that keeps failing.
"""

from __future__ import annotations

import functools
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from dualflow._config import config
from dualflow._undo import current as undo_current
from dualflow.errors import TracingError
from dualflow.ops.dispatch import tracing
from dualflow.passes.manager import resolve_passes
from dualflow.passes.remat import budget_passes
from dualflow.tracer.collective_agreement import CollectiveAgreement
from dualflow.tracer.compile_settings import DISABLED
from dualflow.tracer.compile_settings import check_settings as _check_settings
from dualflow.tracer.dynamic_dims import (
    DynamicDims,
    SymbolicFailed,
    concrete_results,
    symbolic_tracing,
)
from dualflow.tracer.eager_call import run_undoably
from dualflow.tracer.function_names import caller_level as _caller_level
from dualflow.tracer.function_names import name_of as _name
from dualflow.tracer.function_names import positional_names as _positional_names
from dualflow.tracer.interpreter import TracingInterpreter
from dualflow.tracer.lazy import run_lazily
from dualflow.tracer.lazy_choice import LazyOrEager
from dualflow.tracer.lazy_plans import LazyPlans
from dualflow.tracer.plan_cache import NotCacheable, cache_key, entries, plan_cache_dir, store
from dualflow.tracer.plan_load import load_trace
from dualflow.tracer.plan_run import EAGER_RUN, GuardFailed, StepFailed, run_trace
from dualflow.tracer.retrace_reasons import as_kind, closest, described, without_proxies
from dualflow.tracer.signature import Flat, explain_difference, flatten
from dualflow.tracer.state_paths import UnreachableState, function_roots
from dualflow.tracer.stats import Stats
from dualflow.tracer.template_cache import load_templates, store_templates
from dualflow.tracer.trace import Trace, born_state_kept, finish_trace
from dualflow.tracer.tracing_run import check_arguments_kept, trace_call

_MISS: Any = object()


class CompiledFunction:
    """A function compiled by ``@dualflow.compile``; call it like the original."""

    def __init__(
        self,
        fn: Callable,
        max_traces: int = 8,
        passes: Any = None,
        fallback: str = "eager",
        cache_dir: Any = None,
        lazy: bool | str = True,
        memory_budget: Any = None,
        dynamic: bool | None = None,
    ) -> None:
        _check_settings(max_traces, fallback, lazy)
        self.lazy = lazy  # leave the fast path for lazy re-execution ("always": never take it)
        functools.update_wrapper(self, fn, updated=())  # a Module's __dict__ stays its own
        # None: DUALFLOW_PASSES or the default pipeline (O2); resolved now so typos fail early
        # memory_budget: the ``remat=B`` pass last, so the budget is in every cache key too
        self.passes = resolve_passes(passes) + budget_passes(memory_budget)
        self.dynamic = DynamicDims(dynamic, self.passes)  # issue 39: one trace for all sizes
        self.fn, self.max_traces, self.fallback = fn, max_traces, fallback
        self.cache_dir = plan_cache_dir(cache_dir)
        self._disk_entries: set[Any] = set()  # entries this function stored or loaded already
        self.traces: dict[Any, list[Trace]] = {}
        self.history: list[Trace] = []
        self._stats = Stats()
        self._eager_reason: str | None = None
        self._lazy_reason = "lazy='always'" if lazy == "always" else None  # why (lazy.py)
        self._lazy_plans = LazyPlans(self.passes, _name(fn).replace(".<locals>.", "."))
        self._lazy_choice = LazyOrEager(measured=lazy != "always")  # lazy or eager: timed
        self._single_use_reason: str | None = None
        self._single_use_keys: set[Any] = set()
        self._names = _positional_names(getattr(fn, "forward", fn))  # a Module: its forward
        self._lock = threading.RLock()
        # issue 15: how a call that issues collectives decides plan-or-eager with every rank
        self.agreement: Any = CollectiveAgreement(self)  # LocalAgreement(): one process

    def stats(self) -> Stats:
        """Calls, traces, guard failures, eager fallbacks and compile time so far."""
        self._stats.dynamic_plans = self.dynamic.built
        self._stats.lazy_eager_calls = self._lazy_choice.eager_calls
        return self._lazy_plans.report(self._stats)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        # Methods: bind like a function would (each instance shares the trace cache).
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if DISABLED[0] or tracing() is not None or undo_current() is not None:
            # nested inside a trace or an undoable eager call: inline it (its writes join)
            return self.fn(*args, **kwargs)
        return self.agreement.call(lambda: self._serialized(args, kwargs))

    def _serialized(self, args: tuple, kwargs: dict) -> Any:
        with self._lock:  # one call at a time: a plan's buffers serve one call
            self._stats.calls += 1
            if self._lazy_reason is not None:
                self._stats.eager_fallbacks += 1  # not served by the fast path
                return self._off_fast_path(args, kwargs)
            if self._eager_reason is None:
                return self._call(args, kwargs)
            self._stats.eager_fallbacks += 1
        self.agreement.going_eager()  # issue 15: every rank runs eagerly
        return self._eagerly(args, kwargs)

    def _eagerly(self, args: tuple, kwargs: dict) -> Any:
        """Run the call eagerly with the promise a plan run keeps (issue 36): all or nothing
        (``eager_call``); its closing vote is held before it returns (failed peers undo)."""
        return run_undoably(self.fn, args, kwargs, self.agreement.before_commit)

    def _off_fast_path(self, args: tuple, kwargs: dict) -> Any:
        """A call off the fast path: by lazy re-execution, or eagerly where that measured
        faster (``lazy_choice``; both give eager's results)."""
        plans, compiled = self._lazy_plans, self._lazy_plans.compiled
        return self._lazy_choice.call(
            lambda: self._lazily(args, kwargs),
            lambda: self._eagerly(args, kwargs),
            lambda: plans.compiled != compiled,
        )

    def _lazily(self, args: tuple, kwargs: dict) -> Any:
        """Run the call by lazy re-execution (``lazy.py``): its Python runs, its ops run as
        plans keyed by their structure, all or nothing like a plan run."""
        self.agreement.going_eager()  # issue 15: its collectives run in Python's order
        self._stats.lazy_calls += 1
        vote = self.agreement.before_commit if self.agreement.comms else None  # none: no copies
        return run_lazily(self.fn, args, kwargs, self._lazy_plans, vote)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        try:
            flat = flatten(args, kwargs, self._names)
        except TracingError as exc:  # a container it cannot follow exactly: fail closed
            if self.fallback == "error":
                raise
            return self._give_up(args, kwargs, str(exc))
        key = (flat.key, config.snapshot(), flat.aliases)
        reason = None  # why the newest trace of this signature did not serve the call
        for trace in self.traces.get(key, ()):
            mismatch, history = trace.checks.mismatch(flat.leaves), ((), ())
            if mismatch is None and trace.history is not None:
                arrays, nodes, mismatch = trace.history.collect(flat.leaves)
                history = (arrays, nodes)
            if mismatch is None:
                result = self._run(trace, flat, args, kwargs, history)
                if type(result) is not GuardFailed:
                    return result
                mismatch = self._guard_reason(result.node, result.seen)
            reason = reason or mismatch
        for trace in self.dynamic.traces_for(key, flat):  # a template's plan for these sizes
            if trace.checks.mismatch(flat.leaves) is None and trace.history is None:
                result = self._run(trace, flat, args, kwargs)
                if type(result) is not GuardFailed:
                    return result
                reason = reason or self._guard_reason(result.node, result.seen)
        return self._retrace(args, kwargs, flat, key, reason)

    def _run(self, trace: Trace, flat: Flat, args: tuple, kwargs: dict, history=((), ())) -> Any:
        self._stats.plan_runs += 1
        result = run_trace(trace, flat, args, kwargs, self, history, self._lock)
        if result is EAGER_RUN:  # issue 15: another rank runs this call eagerly
            self._stats.eager_fallbacks += 1
            return self._eagerly(args, kwargs)
        if type(result) is GuardFailed:
            self._stats.guard_failures += 1
        elif type(result) is StepFailed:
            eagerly = lambda: self._eagerly(args, kwargs)  # noqa: E731 - eager's own error
            return result.rerun_eagerly(eagerly, self._stats, _name(self.fn))
        return result

    def _guard_reason(self, node: Any, seen: Any = None) -> str:
        kind, expect = node.attrs["kind"], node.attrs["expect"]
        now = "" if seen is None else f" (this call: {as_kind(kind, seen)!r})"
        return f"guard {kind}() == {expect!r} failed at {node.loc}{now}"

    def _retrace(self, args: tuple, kwargs: dict, flat: Flat, key: Any, reason: str | None) -> Any:
        if reason is None and self._single_use_reason is not None:
            reason, self._single_use_reason = self._single_use_reason, None
        if reason is None:
            reason = (
                "first call"
                if not self.history
                else explain_difference(closest(self.history, flat), described(flat))
            )
        if len(self.history) >= self.max_traces:
            return self._give_up(args, kwargs, reason)
        if self.cache_dir is not None:
            loaded = self._from_disk(args, kwargs, flat, key)
            if loaded is not _MISS:
                return loaded
        self._stats.retrace_reasons.append(reason)
        self.agreement.going_eager()  # issue 15: every rank runs this call eagerly
        start = time.perf_counter()
        tracer = TracingInterpreter(_name(self.fn).replace(".<locals>.", ".").replace(" ", "_"))
        tracer.strict = self.fallback == "error"
        tracer.shapes = self.dynamic.plan(key, flat, list(self.traces))
        try:
            with symbolic_tracing(tracer.shapes):
                return self._traced(tracer, args, kwargs, flat, key, reason, start)
        except SymbolicFailed as failed:  # unknown code refused sizes as expressions
            self._stats.retrace_reasons.pop()
            self.dynamic.abandon(tracer.shapes, key, failed.why)
            return self._retrace(args, kwargs, flat, key, f"{reason}; {failed.reason}")

    def _traced(self, tracer: Any, args: tuple, kwargs: dict, flat: Flat, key: Any, *more) -> Any:
        reason, start = more
        symbolic = tracer.shapes is not None and not self.agreement.comms
        try:
            out = concrete_results(trace_call(tracer, self.fn, args, kwargs, flat))  # sizes: ints
        except Exception as exc:  # rolled back; sizes as expressions may be why it raised
            if symbolic and self.dynamic.rerun_after(tracer, key, exc):  # with plain sizes
                raise SymbolicFailed(f"{type(exc).__name__}: {exc}") from exc
            raise
        out, proxies = without_proxies(out)
        try:
            self.agreement.before_commit()  # a failed rank: every rank undoes its run
            if proxies:  # a plan would hand back the first call's array
                tracer.fail_closed(
                    f"the compiled function returns its numpy-array argument as {proxies[0]}; "
                    "a plan cannot return each call's own array. Return dualflow.tensor(x)"
                )
            check_arguments_kept(tracer, flat, lambda: flatten(args, kwargs, self._names))
            trace = finish_trace(tracer, out, flat, described(flat), reason, self.passes)
        except BaseException:
            tracer.rollback()  # a pass or lowering failed: the call must not half-happen
            raise
        if trace is None:  # the run was correct (it ran eagerly) but cannot become a plan
            if symbolic and tracer.collective_at is None:
                self.dynamic.closed_run(tracer, key)  # raises where the run was not eager's
            if tracer.strict:
                tracer.rollback()
                raise TracingError(tracer.failure)
            why = f"tracing failed (fail closed): {tracer.failure}"
            return self._give_up(args, kwargs, why, out, tracer.collective_at is not None)
        trace.compile_seconds = time.perf_counter() - start
        self._keep(trace, tracer, key, flat, args, kwargs, born_kept=born_state_kept(tracer, out))
        return out

    def _keep(self, trace: Trace, tracer: Any, key: Any, flat: Flat, *call: Any, born_kept=False):
        args, kwargs = call
        self._stats.compile_seconds += trace.compile_seconds
        self._stats.traces += 1
        # A first single-use trace is dropped (state born in the call is captured next time);
        # a second one for the same key means the function builds and writes a temporary,
        # unless what it built outlives the call (a new parameter's optimizer buffer, born at
        # the first step after the parameter was replaced): then it is dropped again.
        repeat = key in self._single_use_keys and not born_kept
        if not tracer.single_use or repeat:
            if tracer.shapes is not None:
                self.dynamic.keep(trace, tracer.shapes, key, self.traces)
            self.traces.setdefault(key, []).insert(0, trace)
            self.history.append(trace)
            if self.cache_dir is not None and not tracer.single_use:
                self._to_disk(trace, tracer.files, flat, args, kwargs)
                roots = function_roots(self.fn, args, kwargs)
                store_templates(self, tracer.files, flat, key, roots, self._disk_entries)
        else:
            self._single_use_keys.add(key)
            self._single_use_reason = "state was created during the previous (single-use) trace"

    def _from_disk(self, args: tuple, kwargs: dict, flat: Flat, key: Any) -> Any:
        """Run the call with a stored plan whose state binds to this process's objects."""
        start = time.perf_counter()
        disk_key = cache_key(self.fn, flat, config.snapshot(), self.passes)
        roots = function_roots(self.fn, args, kwargs)
        for entry, meta, forward, backward in entries(self.cache_dir, disk_key, self._disk_entries):
            try:
                trace = load_trace(
                    meta,
                    forward,
                    backward,
                    roots,
                    flat.leaves,
                    described(flat),
                    config.debug,
                    self.fn,
                    {path: obj for obj, path in flat.objects},
                )
            except UnreachableState:
                continue  # e.g. optimizer state not created yet in this process
            if trace.checks.mismatch(flat.leaves) is not None:
                continue
            seconds = time.perf_counter() - start
            trace.cache_note = (
                f"loaded from {entry} in {seconds * 1e3:.1f} ms (tracing and passes took "
                f"{meta['compile_seconds'] * 1e3:.1f} ms when it was stored)"
            )
            self._stats.cache_loads += 1
            self._disk_entries.add(entry)
            self._stats.load_seconds += seconds
            self.traces.setdefault(key, []).insert(0, trace)
            self.history.append(trace)
            result = self._run(trace, flat, args, kwargs)
            if type(result) is not GuardFailed:
                return result
        if load_templates(self, flat, key, roots, self._disk_entries):  # one covers these sizes
            return self._call(args, kwargs)
        return _MISS

    def _to_disk(self, trace: Trace, files: set, flat: Flat, args: tuple, kwargs: dict) -> None:
        try:
            disk_key = cache_key(self.fn, flat, config.snapshot(), self.passes)
            roots = function_roots(self.fn, args, kwargs)
            entry = store(self.cache_dir, disk_key, trace, roots, files)
        except (NotCacheable, OSError) as exc:
            trace.cache_note = f"not stored in the plan cache: {exc}"
            return
        trace.cache_note = f"stored in the plan cache: {entry}"
        self._disk_entries.add(entry)
        self._stats.cache_stores += 1

    def _give_up(
        self, args: tuple, kwargs: dict, reason: str, result: Any = _MISS, collective: bool = False
    ) -> Any:
        """Leave the fast path: run by lazy re-execution from now on (eagerly with
        ``lazy=False``); ``result`` is this call's, when it already ran eagerly."""
        name = _name(self.fn)
        self._stats.eager_fallbacks += 1  # a call the fast path did not serve (lazy or eager)
        if self.lazy and not (collective or self.agreement.comms):  # collectives: all go eager
            self._lazy_reason = reason
            how = "runs by lazy re-execution from now on (its Python at every call, its ops as "
            how += "cached plans)"
        else:
            self._eager_reason = reason
            self.agreement.going_eager()  # issue 15: every rank runs eagerly
            how = "runs eagerly from now on"
        warnings.warn(
            f"dualflow.compile: {name} {how} ({len(self.history)} traces, "
            f"max_traces={self.max_traces}); the reason it left the fast path: {reason}",
            RuntimeWarning,
            stacklevel=_caller_level(),  # the compiled function's caller
        )
        if result is not _MISS:
            return result
        return self._off_fast_path(args, kwargs) if self.lazy else self._eagerly(args, kwargs)


def compile(  # shadows the builtin on purpose: the name users expect (torch.compile)
    fn: Callable | None = None,
    *,
    max_traces: int = 8,
    passes: Any = None,
    fallback: str = "eager",
    cache_dir: Any = None,
    lazy: bool | str = True,
    memory_budget: Any = None,
    dynamic: bool | None = None,
) -> Any:
    """Compile ``fn`` (a training step, a model call...) into traced, guarded graphs.

    Usable as ``@compile`` or ``@compile(max_traces=4)``. ``cache_dir`` (or the environment
    variable ``DUALFLOW_PLAN_CACHE``) stores optimized plans on disk, so another process calling
    the same step with the same signature loads them instead of tracing (``True``: the default
    folder ``~/.cache/dualflow/plans``). A function the fast path (traced plans checked by
    guards) cannot serve soundly runs by lazy re-execution (its Python at every call, its tensor
    ops as cached plans; see docs/tracing.md); ``lazy=False`` runs it eagerly instead, and
    ``lazy="always"`` uses lazy re-execution from the first call. ``memory_budget`` (bytes, or a
    float in (0, 1]: a fraction of the planned peak) makes the ``remat`` pass recompute forward
    values in backward until each graph's planned peak fits it (``dualflow.passes.remat``; same
    results). ``dynamic``: None traces a dimension that changed between calls as a symbol from
    then on, True every dimension from the first call, False none (``tracer/dynamic_dims.py``).

    Example:
        >>> import dualflow
        >>> @dualflow.compile
        ... def double(x):
        ...     return x * 2
        >>> double(dualflow.tensor([1.0, 2.0])).tolist()
        [2.0, 4.0]
        >>> double(dualflow.tensor([3.0, 4.0])).tolist(), double.stats().plan_runs
        ([6.0, 8.0], 1)
    """
    settings = (max_traces, passes, fallback, cache_dir, lazy, memory_budget, dynamic)
    if fn is None:
        _check_settings(max_traces, fallback, lazy)  # at the decorator's line, not the function's
        budget_passes(memory_budget)
        return lambda f: CompiledFunction(f, *settings)
    return CompiledFunction(fn, *settings)

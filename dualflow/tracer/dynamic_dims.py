"""Which dimensions of a compiled function's arguments are dynamic, and the templates serving them.

``compile(dynamic=None)`` (the default): a dimension that changed between two traces of the
same argument structure is traced as a symbol from then on; ``dynamic=True``: every dimension
from the first call; ``dynamic=False``: none (a trace per size). ``mark_dynamic(x, dim)`` and
``mark_static(x, dim)`` decide per tensor. A family is one argument structure with its dynamic
dimensions masked out of the signature; its templates (``shape_template.py``) serve every
size once witnessed. A witness that disagrees refutes the family: its sizes are traced one by
one again, with the reason in ``explain``.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dualflow.errors import ConfigError, TracingError
from dualflow.graph_ir.printer import print_graph
from dualflow.symbolic_shapes import ACTIVE, SYMBOLIC, render_guard
from dualflow.tracer import pytree
from dualflow.tracer.memory_formula import memory_lines
from dualflow.tracer.shape_template import INSTANCES, Template
from dualflow.tracer.symbolic_trace import SymbolicShapes, symbolic_view
from dualflow.tracer.trace import Trace

# id(tensor) -> (a weak reference to it, dims marked dynamic, dims marked static); by id, as a
# tensor's == is elementwise
_MARKS: dict[int, tuple[Any, set[int], set[int]]] = {}
Mask = tuple[tuple[int, frozenset[int]], ...]  # (signature part index, dims), sorted


def _mark(tensor: Any, dim: Any, dynamic: bool) -> None:
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    ndim = len(tensor.shape)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or not -ndim <= d < ndim:
            what = "mark_dynamic" if dynamic else "mark_static"
            raise ConfigError(f"{what}: dim {d!r} is not a dimension of a {ndim}-d tensor")
    key = id(tensor)
    if key not in _MARKS or _MARKS[key][0]() is not tensor:
        _MARKS[key] = (weakref.ref(tensor, lambda _: _MARKS.pop(key, None)), set(), set())
    _, marked_dynamic, marked_static = _MARKS[key]
    for d in dims:
        (marked_dynamic if dynamic else marked_static).add(d % ndim)
        (marked_static if dynamic else marked_dynamic).discard(d % ndim)


def mark_dynamic(tensor: Any, dim: int | tuple[int, ...]) -> None:
    """Trace ``tensor``'s dimension ``dim`` as a symbol when a compiled function receives it.

    Example:
        >>> import dualflow
        >>> x = dualflow.zeros(8, 3)
        >>> mark_dynamic(x, 0); marks(x)
        ({0}, set())
    """
    _mark(tensor, dim, True)


def mark_static(tensor: Any, dim: int | tuple[int, ...]) -> None:
    """Keep ``tensor``'s dimension ``dim`` a constant of the trace (a new size: a new trace).

    Example:
        >>> import dualflow
        >>> x = dualflow.zeros(8, 3)
        >>> mark_static(x, -1); marks(x)
        (set(), {1})
    """
    _mark(tensor, dim, False)


def marks(tensor: Any) -> tuple[set[int], set[int]]:
    """The dimensions marked dynamic and static on ``tensor``."""
    found = _MARKS.get(id(tensor))
    if found is None or found[0]() is not tensor:
        return set(), set()
    return found[1], found[2]


@contextlib.contextmanager
def symbolic_tracing(facts: SymbolicShapes | None) -> Iterator[None]:
    """While a trace with dynamic dimensions runs (forward and backward), ``Tensor.shape``
    asks the tracer for sizes as expressions; other processes' tensors pay one list read."""
    if facts is None:
        yield
        return
    ACTIVE[0] += 1
    try:
        yield
    finally:
        ACTIVE[0] -= 1
        facts.env.closed = True  # sizes left in Python objects act as the traced call's ints


def concrete_results(out: Any) -> Any:
    """A traced call's result with returned sizes (``return loss, x.shape[0]``, in any
    container a plan rebuilds) as plain ints, each guarded: a result's non-tensor parts are
    constants of the trace, so the trace serves only calls where the size is the same."""
    try:
        leaves, _, tree = pytree.flatten(out, "result", is_leaf=_is_size)
    except TracingError:  # a container a plan cannot rebuild: finishing the trace refuses it
        return out
    if not any(_is_size(v) for v in leaves):
        return out  # the very objects returned, as eager returns them
    return pytree.unflatten(tree, [v.concrete("returned") if _is_size(v) else v for v in leaves])


def _is_size(value: Any) -> bool:
    return isinstance(value, SYMBOLIC)


def _array_parts(key: Any) -> list[int]:
    """Indices of a signature's parts that are arrays (in flat leaf order)."""
    return [i for i, part in enumerate(key[0][2]) if part[0] in ("tensor", "array")]


def masked(key: Any, mask: Mask) -> Any:
    """``key`` (a call signature) with the dimensions in ``mask`` left out."""
    (trees, names, parts), *rest = key
    parts = list(parts)
    for index, dims in mask:
        part = parts[index]
        shape = tuple(None if d in dims else n for d, n in enumerate(part[1]))
        parts[index] = (part[0], shape, *part[2:])
    return ((trees, names, tuple(parts)), *rest)


def differing(key: Any, other: Any) -> dict[int, set[int]] | None:
    """The dimensions in which two signatures differ, None when they differ otherwise."""
    (trees, names, parts), *rest = key
    (trees2, names2, parts2), *rest2 = other
    if trees != trees2 or names != names2 or rest != rest2 or len(parts) != len(parts2):
        return None
    found: dict[int, set[int]] = {}
    for i, (a, b) in enumerate(zip(parts, parts2)):
        if a == b:
            continue
        if a[0] not in ("tensor", "array") or a[0] != b[0] or a[2:] != b[2:]:
            return None
        if len(a[1]) != len(b[1]):
            return None
        found[i] = {d for d, (m, n) in enumerate(zip(a[1], b[1])) if m != n}
    return found


def traced_concretely(why: str) -> str:
    """The reason given when sizes are traced as plain ones after a symbolic trace failed."""
    return f"traced with concrete sizes: with symbolic ones it {why}"


class SymbolicFailed(Exception):
    """A trace with dynamic sizes raised or failed closed where concrete sizes may not (code
    that takes only ints): the call is traced again with concrete ones (``why`` says why)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why

    @property
    def reason(self) -> str:
        """The retrace reason of the concrete trace that follows."""
        return traced_concretely(self.why)


NOT_RERUN = (
    "dualflow.compile: this call was traced with dynamic sizes (expressions, not ints); it was "
    "not run again with plain sizes because it had already changed Python state (a run twice "
    "would change it twice). Later calls trace with plain sizes; compile(dynamic=False) does "
    "so from the first call"
)


def unobserved(tracer: Any) -> bool:
    """Whether a failed tracing run may run again without the second run showing: it ran no
    collective (other ranks would not repeat it), no call the tracer could not follow, and
    changed nothing in the Python environment (a list appended to would be appended twice)."""
    failure, told = tracer.failure, tracer.shapes.env.untrusted
    followed = failure is None or (told is not None and told in failure)  # its first failure
    return tracer.collective_at is None and followed and not tracer.env.changes()


@dataclass
class Family:
    """One argument structure with dynamic dimensions: its templates and whether it failed."""

    mask: Mask
    templates: list[Template] = field(default_factory=list)
    refuted: str | None = None
    concrete: str | None = None  # why its dimensions are traced with concrete sizes from now on


class DynamicDims:
    """The dynamic-dimension policy and templates of one compiled function."""

    def __init__(self, dynamic: bool | None, passes: Any) -> None:
        if dynamic not in (None, True, False):
            raise ConfigError(f"compile: dynamic must be None, True or False, got {dynamic!r}")
        self.dynamic, self.passes = dynamic, passes
        self.families: dict[Any, Family] = {}
        self.masks: list[Mask] = []
        self.built = 0  # plans built from templates for new sizes
        self.served: dict[Any, tuple[Template, dict]] = {}  # signature -> its template, binding

    def candidates(self, key: Any, flat: Any) -> list[tuple[Template, dict]]:
        """Witnessed templates that may serve a call, with its binding (guards checked); a
        signature served before skips the search (its sizes fix the binding and the guards)."""
        known = self.served.get(key)
        if known is not None:
            return [known]
        found = []
        shapes = [leaf.shape for leaf in flat.leaves]
        for mask in self.masks:
            family = self.families.get(masked(key, mask))
            for template in () if family is None else family.templates:
                binding = template.binding(shapes) if template.witnessed else None
                if binding is not None and template.failing_guard(binding) is None:
                    found.append((template, binding))
        if found:
            self.served[key] = found[0]
            if len(self.served) > 4 * INSTANCES:
                self.served.pop(next(iter(self.served)))
        return found

    def traces_for(self, key: Any, flat: Any) -> Iterator[Trace]:
        """The traces templates give for this call's sizes (plans built now are counted). A
        template that cannot be rebuilt for them (an op refusing the sizes though every guard
        held) gives none: the call is traced instead, and that trace's witness check refutes
        the family."""
        for template, binding in self.candidates(key, flat):
            before = len(template.instances)
            try:
                trace = template.instance(binding)
            except Exception:
                self.served.pop(key, None)
                continue
            self.built += len(template.instances) > before
            yield trace

    def plan(self, key: Any, flat: Any, known: list[Any]) -> SymbolicShapes | None:
        """The dynamic dimensions to trace this call with, or None (a static trace)."""
        if self.dynamic is False:
            return None
        parts = _array_parts(key)
        mask: dict[int, set[int]] = {}
        for position, index in enumerate(parts):
            dynamic, _ = marks(flat.leaves[position])
            ndim = len(key[0][2][index][1])
            wanted = set(range(ndim)) if self.dynamic else set(dynamic)
            if wanted:
                mask[index] = wanted
        for other in known:  # the dimensions that changed since an earlier trace
            for index, dims in (differing(key, other) or {}).items():
                mask.setdefault(index, set()).update(dims)
        for position, index in enumerate(parts):
            mask.get(index, set()).difference_update(marks(flat.leaves[position])[1])
        final: Mask = tuple(sorted((i, frozenset(d)) for i, d in mask.items() if d))
        if not final:
            return None
        family = self.families.get(masked(key, final))
        if family is not None and (family.refuted or family.concrete) is not None:
            return None
        if final not in self.masks:
            self.masks.append(final)
        self.families.setdefault(masked(key, final), Family(final))
        return SymbolicShapes({parts.index(i): dims for i, dims in final})

    def rerun_after(self, tracer: Any, key: Any, exc: Exception) -> bool:
        """Whether a trace with dynamic sizes that raised ``exc`` is traced again with plain
        sizes (they may be why it raised). Not when the run was observed (``unobserved``): the
        error then stands, with a note, and later calls of the structure trace plain sizes."""
        if unobserved(tracer):
            return True
        self.abandon(tracer.shapes, key, f"{type(exc).__name__}: {exc}")
        if hasattr(exc, "add_note"):  # Python 3.11+
            exc.add_note(NOT_RERUN)
        else:
            warnings.warn(NOT_RERUN, RuntimeWarning, stacklevel=2)
        return False

    def closed_run(self, tracer: Any, key: Any) -> None:
        """A trace with dynamic sizes failed closed. Its run stands for eager's (every Python
        decision on a size went through a guarded comparison; the caller then leaves the fast
        path as for any trace that fails closed) unless code told a size from an int
        (``size_identity``): then it is rolled back and traced again with plain sizes
        (``SymbolicFailed``), or, having changed Python state, raises ``TracingError``."""
        untrusted = tracer.shapes.env.untrusted
        if untrusted is None:
            return
        why = f"failed closed: {tracer.failure}"
        self.abandon(tracer.shapes, key, why)
        tracer.rollback()
        if unobserved(tracer):
            raise SymbolicFailed(why)
        raise TracingError(f"{untrusted}: a size was told from an int. {NOT_RERUN}")

    def abandon(self, facts: SymbolicShapes, key: Any, why: str) -> None:
        """Trace this argument structure's calls with concrete sizes from now on: a trace with
        its dynamic dimensions failed (its templates, witnessed where they hold, still serve)."""
        parts = _array_parts(key)
        mask = tuple(sorted((parts[p], dims) for p, dims in facts.dims.items() if dims))
        family = self.families.setdefault(masked(key, mask), Family(mask))
        family.concrete = family.concrete or traced_concretely(why)

    def keep(self, trace: Trace, facts: SymbolicShapes, key: Any, known: dict) -> None:
        """File a finished trace with dynamic dimensions. Witnessed by an earlier trace of its
        family at other sizes (``known``: signature -> traces), it serves every size from now
        on; contradicted by one (a size taken as a constant), the family is refuted."""
        parts = _array_parts(key)
        mask = tuple(sorted((parts[p], dims) for p, dims in facts.dims.items() if dims))
        family_key = masked(key, mask)
        family = self.families.setdefault(family_key, Family(mask))
        if facts.failure is not None or not facts.symbols:
            trace.cache_note = f"dynamic sizes not usable: {facts.failure or 'no size >= 2'}"
            return
        template = Template(trace, facts, self.passes)
        others = [t for k, ts in known.items() if masked(k, mask) == family_key for t in ts]
        verdicts = [template.check_witness(other) for other in others]
        verdicts += [older.check_witness(trace) for older in family.templates]
        refuted = next((v.reason for v in verdicts if v.refutes), None)
        if refuted is not None:  # every template of the family is suspect: none serves again
            family.refuted = family.refuted or refuted
            self.served = {k: v for k, v in self.served.items() if v[0] not in family.templates}
            family.templates.clear()
            return
        template.witnessed = any(v.reason is None for v in verdicts[: len(others)])
        for older, verdict in zip(family.templates, verdicts[len(others) :]):
            older.witnessed = older.witnessed or verdict.reason is None
        family.templates.insert(0 if template.witnessed else len(family.templates), template)


def describe(dynamic: DynamicDims) -> list[str]:
    """``explain``'s lines about dynamic dimensions: each family's symbols, its templates'
    guards and witness, the plans built for other sizes, or why it was refuted."""
    lines = []
    for family in dynamic.families.values():
        for template in family.templates:
            paths = [p for p, part in template.trace.described if part[0] in ("tensor", "array")]
            named = ", ".join(f"{n} = {paths[p]}.shape[{d}]" for p, d, n in template.facts.symbols)
            state = "witnessed: serves every size" if template.witnessed else "not witnessed yet"
            lines.append(f"dynamic sizes {named} (traced at {template.hints}; {state})")
            guards = template.facts.env.guards
            if guards:
                lines.append("  holds where " + "; ".join(render_guard(g) for g in guards))
            if template.instances:
                built = ", ".join(str(dict(k)) for k in template.instances)
                lines.append(f"  plans built from it for {built}")
            lines += memory_lines(template)
            graph = symbolic_view(template.trace.source_graph, template.facts)
            lines.append("  " + print_graph(graph).replace("\n", "\n  "))
        if family.refuted:
            lines.append(f"dynamic sizes refuted, sizes traced one by one: {family.refuted}")
        if family.concrete:
            lines.append(f"dynamic sizes given up, sizes traced one by one: {family.concrete}")
    return lines

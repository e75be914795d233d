"""Templates in the plan cache: a new process serves a new size from a stored template (issue 39).

A witnessed template is stored as a plan-cache entry of its trace (at the traced sizes, signed
and verified as every entry) under the *structure key* (the function's key with every array
dimension left out, so a process that never traced can find it), with ``meta["template"]``:
the mask of its dynamic dimensions and the key of its family, its forward and backward graphs
before passes as symbolic IR text (``symbolic_text``: symbols, fixed sizes, guards, shapes and
attributes as expressions), their constants, and its witness: the sizes of the real trace that
witnessed it and a digest of that trace's graphs. Loading parses the text (no ``eval``, no
pickle), checks it (``verify_symbolic``), and rebuilds the template for the witness's sizes:
only when that gives the witnessed graphs exactly (same digest) is it loaded as witnessed;
otherwise it is loaded as not witnessed (it then needs a real trace at other sizes again).
"""

from __future__ import annotations

import dataclasses
import hashlib
import weakref
from typing import Any

import numpy as np

from dualflow._config import config
from dualflow.graph_ir.json_format import decode_attr, encode_attr
from dualflow.graph_ir.printer import print_graph
from dualflow.graph_ir.symbolic_text import SymbolicGraph
from dualflow.graph_ir.verify_symbolic import verify_symbolic
from dualflow.tracer.dynamic_dims import Family, Mask, masked
from dualflow.tracer.plan_cache import NotCacheable, cache_key, entries, store
from dualflow.tracer.plan_load import load_trace
from dualflow.tracer.shape_template import Template, leaf_shapes
from dualflow.tracer.signature import Flat
from dualflow.tracer.symbolic_trace import instantiate, parse_template, print_template
from dualflow.tracer.trace import Trace

_MAX_CONST_BYTES = 4 * 2**20  # a template's constants travel as JSON: small ones only
_STORED: weakref.WeakSet = weakref.WeakSet()  # templates this process stored (or tried to)


def _masked_flat(flat: Flat, mask: Mask) -> Flat:
    return dataclasses.replace(flat, key=masked((flat.key,), mask)[0])


def _every_dim(flat: Flat) -> Mask:
    parts = flat.key[2]
    return tuple(
        (i, frozenset(range(len(p[1])))) for i, p in enumerate(parts) if p[0] in ("tensor", "array")
    )


def structure_key(fn: Any, flat: Flat) -> str:
    """The disk key of every template a call's function and argument structure may have.

    Example:
        >>> import dualflow
        >>> from dualflow.tracer.signature import flatten
        >>> fn = dualflow.compile(lambda x: x + 1)
        >>> keys = [structure_key(fn, flatten((dualflow.zeros(n),), {}, ["x"])) for n in (4, 6)]
        >>> keys[0] == keys[1], len(keys[0])
        (True, 64)
    """
    return cache_key(fn.fn, _masked_flat(flat, _every_dim(flat)), config.snapshot(), fn.passes)


def _family_key(fn: Any, flat: Flat, mask: Mask) -> str:
    return cache_key(fn.fn, _masked_flat(flat, mask), config.snapshot(), fn.passes)


def _sources(trace: Trace) -> list:
    return [trace.source_graph] + ([] if trace.backward is None else [trace.backward.source_graph])


def graphs_digest(graphs: list) -> str:
    """A digest of graphs as ``same_graph`` compares them: text, constants' dtypes, shapes, bytes.

    Example:
        >>> len(graphs_digest([]))
        64
    """
    digest = hashlib.sha256()
    for graph in graphs:
        digest.update(print_graph(graph).encode())
        for value, array in sorted(graph.consts.items(), key=lambda item: item[0].id):
            array = np.ascontiguousarray(array)
            digest.update(f"{value.id}:{array.dtype.str}:{array.shape}".encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


def _witness(fn: Any, template: Template, family: Family, key: Any) -> dict | None:
    """The sizes and graph digest of a real trace that witnesses ``template``, or None."""
    mine = masked(key, family.mask)
    for other_key, traces in fn.traces.items():
        if masked(other_key, family.mask) != mine:
            continue
        for other in traces:
            if other is not template.trace and template.check_witness(other).reason is None:
                binding = template.binding(leaf_shapes(other.described))
                return {"binding": binding, "digest": graphs_digest(_sources(other))}
    return None


def _record(fn: Any, flat: Flat, template: Template, family: Family, witness: dict) -> dict:
    graphs = _sources(template.trace)
    if sum(np.asarray(a).nbytes for g in graphs for a in g.consts.values()) > _MAX_CONST_BYTES:
        raise NotCacheable("the template's constants are too big to store as data")
    consts = [{str(v.id): encode_attr(np.asarray(a)) for v, a in g.consts.items()} for g in graphs]
    return {
        "mask": [[i, sorted(dims)] for i, dims in family.mask],
        "family": _family_key(fn, flat, family.mask),
        "graphs": [print_template(g, template.facts) for g in graphs],
        "consts": consts,
        "witness": witness,
    }


def store_templates(fn: Any, files: set, flat: Flat, key: Any, roots: dict, done: set) -> None:
    """Store every witnessed template of ``fn`` not stored yet (those whose witness a real
    trace of this process shows; the others stay in memory only). The entries written are
    added to ``done`` (this process does not load them back: they are in memory).

    Example:
        >>> import dualflow, tempfile
        >>> from dualflow.tracer.signature import flatten
        >>> fn = dualflow.compile(lambda x: x + 1, cache_dir=tempfile.mkdtemp())
        >>> flat = flatten((dualflow.zeros(4),), {}, ["x"])
        >>> store_templates(fn, set(), flat, (flat.key,), {}, set())  # no template: no entry
    """
    for family in fn.dynamic.families.values():
        for template in family.templates:
            if not template.witnessed or template in _STORED:
                continue
            _STORED.add(template)
            try:  # the call already ran: storing must never make it fail
                witness = _witness(fn, template, family, key)
                if witness is None:
                    continue  # no real trace here shows the witness again
                extra = {"template": _record(fn, flat, template, family, witness)}
                key_now = structure_key(fn, flat)
                done.add(store(fn.cache_dir, key_now, template.trace, roots, files, extra))
            except Exception as exc:  # NotCacheable, OSError, an attribute JSON cannot hold
                template.trace.cache_note = f"template not stored in the plan cache: {exc}"


def _parsed(record: dict) -> tuple[list, Any]:
    """The stored graphs before passes and their facts (one SymbolicShapes for both)."""
    graphs, facts = [], None
    for text, consts in zip(record["graphs"], record["consts"], strict=True):
        arrays = {int(k): decode_attr(v) for k, v in consts.items()}
        if not all(type(a) is np.ndarray for a in arrays.values()):
            raise ValueError("a template constant is not an array")
        graph, found = parse_template(text, arrays)
        verify_symbolic(
            SymbolicGraph(
                graph, found.env, found.symbols, found.constants, found.shapes, found.nodes
            )
        )
        if facts is None:
            facts = found
        elif (facts.env.hints, facts.env.guards, facts.symbols, facts.constants) != (
            found.env.hints,
            found.env.guards,
            found.symbols,
            found.constants,
        ):
            raise ValueError("the forward and backward graphs hold different symbols or guards")
        else:
            facts.shapes.update(found.shapes)
            facts.nodes.update(found.nodes)
        graphs.append(graph)
    return graphs, facts


def _rechecked(template: Template, witness: Any) -> bool:
    """Whether the template, rebuilt for its witness's sizes, gives the witnessed graphs."""
    try:
        binding = {str(k): int(v) for k, v in witness["binding"].items()}
        if binding == template.hints or template.failing_guard(binding) is not None:
            return False
        built = [instantiate(g, template.facts, binding) for g in _sources(template.trace)]
        return graphs_digest(built) == witness["digest"]
    except Exception:  # unsure: not witnessed (a real trace at other sizes witnesses it again)
        return False


def _described(flat: Flat, facts: Any) -> list:
    """The call's signature parts with the template's dynamic sizes at their traced values."""
    sizes = {(p, d): facts.env.hints[n] for p, d, n in facts.symbols}
    sizes.update({(p, d): n for p, d, n in facts.constants})
    found, position = [], 0
    for path, part in flat.described:
        if part[0] in ("tensor", "array"):
            shape = tuple(sizes.get((position, d), n) for d, n in enumerate(part[1]))
            part, position = (part[0], shape, *part[2:]), position + 1
        found.append((path, part))
    return found


def _template(fn: Any, flat: Flat, loaded: tuple, roots: dict) -> tuple[Template, Mask] | None:
    meta, forward, backward = loaded
    record = meta["template"]
    mask = tuple((int(i), frozenset(int(d) for d in dims)) for i, dims in record["mask"])
    if _family_key(fn, flat, mask) != record["family"]:
        return None  # a template of another family of this structure
    (source, *rest), facts = _parsed(record)
    if len(rest) != (backward is not None):
        raise ValueError("the template's graphs do not match the entry's")
    objects = {path: obj for obj, path in flat.objects}
    described = _described(flat, facts)
    trace = load_trace(
        meta, forward, backward, roots, flat.leaves, described, config.debug, fn.fn, objects
    )
    trace.source_graph = source
    if backward is not None:
        trace.backward.source_graph = rest[0]
    template = Template(trace, facts, fn.dynamic.passes)
    template.witnessed = _rechecked(template, record["witness"])
    return template, mask


def load_templates(fn: Any, flat: Flat, key: Any, roots: dict, skip: set) -> bool:
    """File the stored templates of this call's family into ``fn``'s dynamic dimensions;
    True when one of them is witnessed and covers this call's sizes (the call can run it).
    Entries in ``skip`` were tried already; those tried now are added to it.

    Example:
        >>> import dualflow, tempfile
        >>> from dualflow.tracer.signature import flatten
        >>> fn = dualflow.compile(lambda x: x + 1, cache_dir=tempfile.mkdtemp())
        >>> flat = flatten((dualflow.zeros(4),), {}, ["x"])
        >>> load_templates(fn, flat, (flat.key,), {}, set())  # an empty cache
        False
    """
    served = False
    for entry, meta, forward, backward in entries(fn.cache_dir, structure_key(fn, flat), skip):
        if not isinstance(meta.get("template"), dict):
            continue
        try:
            found = _template(fn, flat, (meta, forward, backward), roots)
        except Exception:  # unreadable facts, state not reachable yet: the call traces
            continue
        if found is None:
            continue
        skip.add(entry)
        template, mask = found
        family = fn.dynamic.families.setdefault(masked(key, mask), Family(mask))
        if family.refuted is not None:
            continue
        if mask not in fn.dynamic.masks:
            fn.dynamic.masks.append(mask)
        _STORED.add(template)  # stored already
        family.templates.insert(0 if template.witnessed else len(family.templates), template)
        binding = template.binding([leaf.shape for leaf in flat.leaves])
        served = served or (
            template.witnessed and binding is not None and template.failing_guard(binding) is None
        )
    return served

"""Every op's ``infer`` with sizes as expressions (issue 39): over the whole op table, each sample
is traced with every dimension dynamic; the symbolic shapes must equal the concrete ones at the
traced sizes and, rebuilt for two other sizes the trace's guards allow, equal what each op's
concrete ``infer`` gives there."""

from __future__ import annotations

import warnings

import numpy as np

import dualflow
from dualflow.graph_ir.ir import Value
from dualflow.symbolic_containers import substitute
from dualflow.tracer.symbolic_trace import instantiate
from tests.opinfo import OP_INFOS


def _step(info, sample):
    def f(*inputs):
        args = [
            dualflow.tensor(a, requires_grad=a.dtype.kind == "f") if hasattr(a, "dtype") else a
            for a in inputs
        ]
        out = info.fn(*args, **sample.kwargs)
        outs = out if isinstance(out, tuple | list) else (out,)
        total = None
        for o in outs:
            if isinstance(o, dualflow.Tensor) and o.requires_grad and o.dtype.kind == "f":
                total = o.sum() if total is None else total + o.sum()
        if total is not None:
            total.backward()
        return out

    return f


CHECKED = [0, 0]  # sizes rebuilt, sizes the trace's guards excluded


def _problems(template) -> list[str]:
    facts, graph = template.facts, template.trace.source_graph
    found = []
    for value, shape in facts.shapes.items():
        if substitute(shape, template.hints) != value.shape:
            found.append(f"%{value.id}: {shape} at {template.hints} is not {value.shape}")
    for bump in (1, 3):
        binding = {name: size + bump for name, size in template.hints.items()}
        if template.failing_guard(binding) is not None:
            CHECKED[1] += 1
            continue
        CHECKED[0] += 1
        try:
            built = instantiate(graph, facts, binding)
        except Exception as exc:  # symbolic infer allowed sizes concrete infer refuses
            found.append(f"at {binding}: {type(exc).__name__}: {exc}")
            continue
        shapes = {v.id: v.shape for n in built.nodes for v in n.outputs}
        for value, shape in facts.shapes.items():
            if value.id in shapes and substitute(shape, binding) != shapes[value.id]:
                found.append(f"%{value.id} at {binding}: {shape} -> {shapes[value.id]}")
    return found


def op_table_traces(rng: np.random.Generator):
    """Every op-table sample with array inputs, traced with every dimension dynamic: yields
    (label, compiled function) for those that run eagerly (error cases are not about sizes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for info in OP_INFOS:
            for sample in info.samples(rng):
                arrays = [a for a in sample.inputs if isinstance(a, np.ndarray) and a.ndim]
                if not arrays:
                    continue
                fn = dualflow.compile(_step(info, sample), dynamic=True, lazy=False)
                try:
                    fn(*sample.inputs)
                except Exception:
                    continue
                yield f"{info.name} {sample.name}", fn


def test_symbolic_infer_matches_concrete_infer_over_the_op_table() -> None:
    problems, traced = {}, 0
    for label, fn in op_table_traces(np.random.default_rng(0)):
        for family in fn.dynamic.families.values():
            for template in family.templates:
                traced += 1
                failure = template.facts.failure
                found = [failure] if failure else _problems(template)
                if found:
                    problems[label] = found[:3]
        failures = [t.cache_note for t in fn.history if t.cache_note.startswith("dynamic sizes")]
        if failures:
            problems[label] = failures
    assert traced > 100
    assert CHECKED[0] > CHECKED[1], CHECKED  # most sizes are served, not guarded out
    assert not problems, problems


def test_value_ids_survive_instantiation() -> None:
    def f(x):
        return (x * 2).reshape(x.shape[0] * 3, -1)

    fn = dualflow.compile(f, dynamic=True)
    fn(dualflow.zeros(4, 6))
    (template,) = next(iter(fn.dynamic.families.values())).templates
    built = instantiate(template.trace.source_graph, template.facts, {"s0": 5, "s1": 6})
    assert [type(v) for v in built.outputs] == [Value]
    assert built.outputs[0].shape == (15, 2)

"""The op table's symbolic traces through the IR text (issue 39, ``symir``): every sample traced
with every dimension dynamic; each template's forward and backward graphs print with their
sizes as expressions, parse back to the same text and the same concrete graph, pass
``verify_symbolic``, and rebuilt for other sizes their guards allow equal the original's."""

from __future__ import annotations

import numpy as np

from dualflow.graph_ir.symbolic_text import SymbolicGraph
from dualflow.graph_ir.verify_symbolic import verify_symbolic
from dualflow.tracer.symbolic_trace import instantiate, parse_template, print_template, same_graph
from tests.ops.test_symbolic_infer import op_table_traces


def _rebuilt(graph, facts, binding):
    try:
        return instantiate(graph, facts, binding)
    except Exception as exc:  # both must refuse alike
        return f"{type(exc).__name__}: {exc}"


def _problems(template) -> tuple[list[str], int]:
    found, compared = [], 0
    graphs = [template.trace.source_graph]
    if template.trace.backward is not None:
        graphs.append(template.trace.backward.source_graph)
    for graph in graphs:
        text = print_template(graph, template.facts)
        parsed, facts = parse_template(text, {v.id: a for v, a in graph.consts.items()})
        if print_template(parsed, facts) != text:
            found.append(f"print -> parse -> print differs:\n{text}")
        if same_graph(parsed, graph) is not None:
            found.append(f"parsed graph differs: {same_graph(parsed, graph)}")
        again = SymbolicGraph(parsed, facts.env, facts.symbols, facts.constants)
        again.shapes, again.nodes = facts.shapes, facts.nodes
        verify_symbolic(again)
        for bump in (1, 3):
            binding = {name: size + bump for name, size in template.hints.items()}
            if template.failing_guard(binding) is not None:
                continue
            mine, theirs = (
                _rebuilt(parsed, facts, binding),
                _rebuilt(graph, template.facts, binding),
            )
            compared += 1
            if isinstance(mine, str) or isinstance(theirs, str):
                if mine != theirs:
                    found.append(f"at {binding}: {mine} against {theirs}")
            elif same_graph(mine, theirs) is not None:
                found.append(f"at {binding}: {same_graph(mine, theirs)}")
    return found, compared


def test_op_table_templates_round_trip_through_the_text_format() -> None:
    problems, traced, compared = {}, 0, 0
    for label, fn in op_table_traces(np.random.default_rng(0)):
        for family in fn.dynamic.families.values():
            for template in family.templates:
                traced += 1
                found, count = _problems(template)
                compared += count
                if found:
                    problems[label] = found[:3]
    assert traced > 100 and compared > traced
    assert not problems, problems

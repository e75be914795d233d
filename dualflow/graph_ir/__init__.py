"""The graph IR: immutable SSA graphs, their text format, checks, interpreter and export.

This layer imports only ``ops`` (the registry) and below: a saved graph loads and runs without the
eager machinery (DESIGN §1, §4).

Import cycle: ``ir``'s ``Graph.__str__`` is the text format of ``printer``, which reads ``ir``'s
classes (the import back is at call time).
"""

from dualflow.graph_ir.builder import GraphBuilder
from dualflow.graph_ir.export import to_dot, to_networkx
from dualflow.graph_ir.interpret import Interpretation, interpret
from dualflow.graph_ir.ir import Graph, Node, Value
from dualflow.graph_ir.parser import GraphParseError, parse_graph, parse_literal
from dualflow.graph_ir.printer import format_literal, format_node, print_graph
from dualflow.graph_ir.serialize import load, save
from dualflow.graph_ir.verify import GraphVerifyError, verify

__all__ = [
    "Graph",
    "GraphBuilder",
    "GraphParseError",
    "GraphVerifyError",
    "Interpretation",
    "Node",
    "Value",
    "format_literal",
    "format_node",
    "interpret",
    "load",
    "parse_graph",
    "parse_literal",
    "print_graph",
    "save",
    "to_dot",
    "to_networkx",
    "verify",
]

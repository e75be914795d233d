"""``tape.record`` is the only place tape nodes are built, and ``tape.edge`` the only definition of
an input's edge (None / (creator node, output index) / leaf tensor); both are checked by scanning
the package's source, like the layering test. Also: what ``record`` builds, per kind of site.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np

import dualflow
from dualflow.ops import OPS
from dualflow.ops.dispatch import apply
from dualflow.tensor.tape import Node, edge, record

PACKAGE = Path(dualflow.__file__).resolve().parent
TAPE = PACKAGE / "tensor" / "tape.py"


def _tape_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound to ``tape.Node`` and to the ``tape`` module by this module's imports."""
    classes, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "dualflow.tensor.tape":
            classes |= {a.asname or a.name for a in node.names if a.name == "Node"}
        elif isinstance(node, ast.ImportFrom) and node.module == "dualflow.tensor":
            modules |= {a.asname or a.name for a in node.names if a.name == "tape"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name.endswith(".tape") and a.asname}
    return classes, modules


def node_constructions(source: str, defines_node: bool = False) -> list[int]:
    """Lines where ``source`` makes a tape ``Node``: calls it, or hands it to a ``__new__``
    (by any imported name; by its own name in the module that ``defines_node``)."""
    tree = ast.parse(source)
    classes, modules = _tape_names(tree)
    classes |= {"Node"} if defines_node else set()
    lines = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        func, names = ast.unparse(call.func), [ast.unparse(a) for a in call.args[:1]]
        owner, _, attr = func.rpartition(".")
        by_module = attr == "Node" and (owner in modules or owner.endswith("tensor.tape"))
        node_class = func in classes or by_module
        allocates = "new" in attr and any(n in classes or n.endswith(".Node") for n in names)
        if node_class or allocates:
            lines.append(call.lineno)
    return lines


def edge_expressions(source: str) -> list[ast.IfExp]:
    """``t if t.creator is None else (t.creator, t.output_index)``-shaped expressions: a
    conditional whose either branch is a tuple naming a tensor's ``output_index``."""
    found = []
    for expr in ast.walk(ast.parse(source)):
        if isinstance(expr, ast.IfExp):
            branches = [b for b in (expr.body, expr.orelse) if isinstance(b, ast.Tuple)]
            items = [e for b in branches for e in b.elts]
            if any(isinstance(e, ast.Attribute) and e.attr == "output_index" for e in items):
                found.append(expr)
    return found


def edge_lines(source: str) -> list[int]:
    return [expr.lineno for expr in edge_expressions(source)]


def _offenders(find) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != TAPE:
            found += [f"{path.relative_to(PACKAGE)}:{n}" for n in find(path.read_text())]
    return found


def test_tape_nodes_are_built_only_by_record() -> None:
    assert _offenders(node_constructions) == []
    assert len(node_constructions(TAPE.read_text(), defines_node=True)) == 1  # record's own
    assert "_new(Node)" in inspect.getsource(record)


def test_the_edge_expression_is_written_once() -> None:
    assert _offenders(edge_lines) == []
    # edge() and record's loop (inlined there: it runs for every recorded eager op), identical
    copies = [ast.unparse(e) for e in edge_expressions(TAPE.read_text())]
    assert len(copies) == 2 and copies[0] == copies[1]
    assert copies[0] in inspect.getsource(edge) and copies[0] in inspect.getsource(record)


def test_the_scanners_find_what_they_look_for() -> None:
    direct = "from dualflow.tensor.tape import Node as N\nn = N(op, {}, (), (), (), (), None)\n"
    by_module = "from dualflow.tensor import tape\nn = tape.Node(op)\nm = x.Node(op)\n"
    allocated = "from dualflow.tensor.tape import Node\nn = object.__new__(Node)\nm = f(Node)\n"
    assert node_constructions(direct) == [2] and node_constructions(by_module) == [2]
    assert node_constructions(allocated) == [2]
    copied = "e = t if t.creator is None else (t.creator, t.output_index)\n"
    assert edge_lines(copied) == [1]


def test_record_builds_edges_and_shapes() -> None:
    leaf = dualflow.tensor([1.0, 2.0], requires_grad=True)
    computed = leaf * 2
    constant = dualflow.tensor([3.0, 4.0])
    node = record(OPS["add"], {}, (leaf, computed, constant, 1.5))
    assert isinstance(node, Node) and node.op is OPS["add"] and not node.released
    assert node.edges == (leaf, (computed.creator, 0), None, None)
    assert node.in_shapes == ((2,), (2,), (2,), ())
    assert node.seq > computed.creator.seq  # numbered in creation order (backward order)
    assert [edge(t) for t in (leaf, computed, constant, 1.5)] == list(node.edges)


def test_eager_ops_record_one_node_per_call() -> None:
    x = dualflow.tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    gamma = dualflow.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    assert y.creator.op.name == "multiply" and y.creator.edges == (x, None)
    outs = apply(OPS["batch_norm"], y, gamma, dualflow.tensor([0.0, 1.0]), eps=1e-5)
    node = outs[0].creator
    assert node.op.name == "batch_norm" and all(o.creator is node for o in outs)
    assert node.edges == ((y.creator, 0), gamma, None)
    assert node.out_metas == tuple((o.shape, o.dtype) for o in outs)
    with dualflow.no_grad():
        assert (x * 2.0).creator is None


def test_hook_and_compiled_sites_record_nodes_that_backward_runs() -> None:
    layer = dualflow.nn.Linear(2, 2)
    x = dualflow.tensor([[1.0, -2.0], [0.5, 3.0]], requires_grad=True)
    seen: list[int] = []
    layer.register_full_backward_hook(lambda m, gi, go: seen.append(len(go)))
    out = layer(x)
    assert out.creator.op.kind == "hook" and out.creator.edges[0][0].op.name == "add"
    step = dualflow.compile(lambda t: (layer(t) * t).sum())
    for call in range(2):  # the second call runs the plan: the compiled:* node is recorded
        x.grad = None
        loss = step(x)
        if call == 1:  # the node of a plan call's outputs: edges to what gets a gradient
            assert loss.creator.op.name.startswith("compiled:")
            assert loss.creator.edges == (x, layer.weight, layer.bias)
        loss.backward()
        got = x.grad.numpy().copy()
        x.grad = None
        (layer(x) * x).sum().backward()
        np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-6)
    assert step.stats().plan_runs == 1 and seen == [1, 1, 1, 1]

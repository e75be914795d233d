"""Save a graph as its text plus an ``.npz`` of constants and state; load it back (no pickle).

A saved training step or inference graph runs in a fresh process from these two files alone,
without the Python source of the model (MXNet-style checkpoint).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from dualflow.device import CPU, send
from dualflow.errors import CheckpointError
from dualflow.graph_ir.ir import Graph
from dualflow.graph_ir.parser import GraphParseError, parse_graph
from dualflow.graph_ir.printer import print_graph


def _atomic_write(path: str, write: Any) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save(graph: Graph, path: str, state: list[Any] | None = None) -> tuple[str, str]:
    """Write ``path.graph`` (text) and ``path.npz`` (constants and state arrays).

    Example:
        >>> import tempfile, os
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32"); b.output(*b.node("exp", [x]))
        >>> d = tempfile.mkdtemp(); [os.path.basename(p) for p in save(b.build(), d + "/f")]
        ['f.graph', 'f.npz']
    """
    arrays = {f"const_{v.id}": np.asarray(a) for v, a in graph.consts.items()}
    for value, array in zip(graph.state, state or []):
        arrays[f"state_{value.id}"] = np.asarray(send(array, CPU))
    text = print_graph(graph).encode()
    _atomic_write(path + ".npz", lambda f: np.savez(f, **arrays))
    _atomic_write(path + ".graph", lambda f: f.write(text))
    return path + ".graph", path + ".npz"


def load(path: str) -> tuple[Graph, list[Any] | None]:
    """Read a graph saved by ``save``; returns the graph and its saved state (or None).

    Example:
        >>> import tempfile
        >>> from dualflow.graph_ir.builder import GraphBuilder
        >>> b = GraphBuilder("f"); x = b.input((2,), "float32"); b.output(*b.node("exp", [x]))
        >>> d = tempfile.mkdtemp(); _ = save(b.build(), d + "/f")
        >>> load(d + "/f")[0].nodes[0].op
        'exp'
    """
    try:
        with open(path + ".graph") as f:
            text = f.read()
        with np.load(path + ".npz", allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"cannot read saved graph {path}(.graph/.npz): {exc}") from None
    consts = {int(k[6:]): a for k, a in arrays.items() if k.startswith("const_")}
    try:
        graph = parse_graph(text, consts)
    except GraphParseError as exc:
        raise CheckpointError(f"{path}.graph is not a valid graph: {exc}") from None
    missing = [v.id for v in graph.consts if v.id not in consts]
    if missing:
        raise CheckpointError(f"{path}.npz lacks constants {missing}")
    state_keys = [f"state_{v.id}" for v in graph.state]
    state = [arrays[k] for k in state_keys] if all(k in arrays for k in state_keys) else None
    return graph, state

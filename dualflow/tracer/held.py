"""What a compiled function keeps between calls: the bytes of the arrays its traces hold.

Counted from the objects the traces actually reference: each plan's pooled buffers and the last
outputs only the plan still holds (``Plan.held_bytes``), and the constant arrays of the graphs,
as run (and sent to the device) and as traced (``explain(passes=True)`` runs the passes on those
again), forward and backward, each array once however many graphs share it. State the traces
read by reference (parameters, optimizer state, environment arrays) and the objects guards
compare by identity belong to the program, not to the compiled function; guards' expected values
are Python scalars; and the tracing run's own arrays are not kept at all (issue 36).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass
class Held:
    """Bytes a compiled function (or one trace) keeps alive between calls."""

    buffers: int = 0  # plans' pooled buffers and the outputs only they still reference
    constants: int = 0  # constant arrays of the graphs (as run and as traced)

    @property
    def total(self) -> int:
        """All bytes held between calls."""
        return self.buffers + self.constants

    def describe(self) -> str:
        """One line for ``explain``.

        Example:
            >>> Held(3 * 2**20, 2**19).describe()
            'held between calls: 3670016 B (3.50 MiB): plan buffers 3145728 B, constants 524288 B'
        """
        return (
            f"held between calls: {self.total} B ({self.total / 2**20:.2f} MiB): "
            f"plan buffers {self.buffers} B, constants {self.constants} B"
        )


def held_by(traces: Iterable[Any]) -> Held:
    """What ``traces`` (``Trace`` objects, e.g. a compiled function's ``history``) hold.

    Example:
        >>> import dualflow
        >>> f = dualflow.compile(lambda x: (x * 2).exp().sum())
        >>> _ = f(dualflow.tensor([1.0, 2.0])); _ = f(dualflow.tensor([3.0, 4.0]))
        >>> held_by(f.history).total >= 0
        True
    """
    held, seen = Held(), set()
    for trace in traces:
        parts = [trace] if trace.backward is None else [trace, trace.backward]
        for part in parts:
            held.buffers += part.plan.held_bytes
            graphs = [part.graph, part.source_graph]
            arrays = [a for g in graphs if g is not None for a in g.consts.values()]
            for array in [*arrays, *part.plan._consts]:
                root = _root(array)
                if id(root) not in seen:
                    seen.add(id(root))
                    held.constants += int(getattr(root, "nbytes", 0))
    return held


def _root(array: Any) -> Any:
    """The array owning ``array``'s memory (a view counts as its base, once)."""
    while getattr(array, "base", None) is not None and hasattr(array.base, "nbytes"):
        array = array.base
    return array

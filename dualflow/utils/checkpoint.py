"""Activation checkpointing (PyTorch's ``torch.utils.checkpoint``): ``checkpoint(fn, *args)``
keeps none of the values ``fn``'s ops saved for backward; backward re-runs ``fn`` to get them.

It works like PyTorch's non-reentrant checkpoint: ``fn`` runs with the tape on, so its outputs
are connected to every tensor it used (arguments, and parameters it closes over); then every
tape node made inside it has its saved values replaced by a ``_Pending`` placeholder. The first
time backward reads one, the segment re-runs ``fn`` with the default generators' state and the
autocast setting as they were at the forward (so dropout draws the same mask), matches the new
tape nodes to the old ones in creation order and hands their saved values over. The re-run
records a tape connected to the same inputs, so ``create_graph=True`` differentiates through it
(double backward). Inside
``@dualflow.compile`` the re-run is recorded as recompute nodes of the backward
(``Node.recompute``): compiled equals eager, CSE leaves them apart from the forward's values,
and the memory planner frees those after their last forward use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from dualflow import ops
from dualflow._config import config, no_grad, using_config
from dualflow.device import Device
from dualflow.errors import RecomputeError, with_location
from dualflow.graph_ir.builder import recomputing
from dualflow.tensor.core import Tensor
from dualflow.tensor.random import Generator, default_generator
from dualflow.tensor.tape import Node, next_seq


def _tensors(value: Any) -> list[Tensor]:
    """The tensors of an output: a Tensor, or those in a (nested) tuple/list/dict."""
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _inner_nodes(outputs: list[Tensor], start: int) -> list[Node]:
    """The tape nodes made since sequence number ``start`` that ``outputs`` depend on, oldest
    first (the tape outside the segment is older, so the walk stops there)."""
    seen: dict[int, Node] = {}
    stack = [t.creator for t in outputs if t.creator is not None]
    while stack:
        node = stack.pop()
        if node.seq < start or id(node) in seen:
            continue
        seen[id(node)] = node
        stack += [e[0] for e in node.edges or () if type(e) is tuple]
    return sorted(seen.values(), key=lambda n: n.seq)


class _RngSnapshot:
    """The state of the default generators of the segment's devices, restorable for a re-run."""

    def __init__(self, devices: Iterable[Device]) -> None:
        self.generators: list[Generator] = [default_generator(d) for d in devices]
        with no_grad():
            self.states = [g.state.clone() for g in self.generators]

    def swap_in(self) -> list[Tensor]:
        """Set the saved states; returns the current ones (for ``restore``)."""
        with no_grad():
            current = [g.state.clone() for g in self.generators]
            for g, state in zip(self.generators, self.states):
                ops.assign(g.state, state)
        return current

    def restore(self, states: list[Tensor]) -> None:
        with no_grad():
            for g, state in zip(self.generators, states):
                ops.assign(g.state, state)


class _Pending:
    """Stands for a node's saved values until the segment re-runs; reading it re-runs it (and
    the node then holds the real values, so this is read once per node at most)."""

    __slots__ = ("kind", "node", "segment")

    def __init__(self, segment: _Segment, node: Node, kind: str) -> None:
        self.segment, self.node, self.kind = segment, node, kind

    def _real(self) -> tuple:
        self.segment.recompute()
        return getattr(self.node, self.kind) or ()

    def __getitem__(self, index: int) -> Any:
        return self._real()[index]

    def __iter__(self) -> Any:
        return iter(self._real())

    def __len__(self) -> int:
        return len(self._real())

    def __bool__(self) -> bool:  # it stands for a non-empty tuple: no re-run just to ask
        return True


class _Segment:
    """One checkpointed call: the function, its arguments and the nodes waiting for values."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict, rng: _RngSnapshot | None) -> None:
        self.fn, self.args, self.kwargs, self.rng = fn, args, kwargs, rng
        self.autocast = config.autocast  # the re-run casts as the forward did (PyTorch's rule)
        self.nodes: list[Node] = []

    def forget(self, nodes: list[Node]) -> None:
        """Drop the saved values of ``nodes`` (the segment's tape), to be recomputed."""
        self.nodes = nodes
        for node in nodes:  # a nested checkpoint's nodes already wait (on their own segment)
            if type(node.saved_inputs) is tuple and node.saved_inputs:
                node.saved_inputs = _Pending(self, node, "saved_inputs")
            if type(node.saved_outputs) is tuple and node.saved_outputs:
                node.saved_outputs = _Pending(self, node, "saved_outputs")

    def recompute(self) -> None:
        """Re-run the function and give each waiting node its saved values back."""
        if not self.nodes:
            return
        current = self.rng.swap_in() if self.rng is not None else None
        try:
            # traced (inside @compile), the re-run's nodes are recompute nodes: CSE keeps them
            # apart from the forward's, so the forward's values die after their forward use
            with using_config(grad_enabled=True, autocast=self.autocast), recomputing():
                start = next_seq()
                outputs = self.fn(*self.args, **self.kwargs)
        finally:
            if current is not None:
                self.rng.restore(current)
        fresh = _inner_nodes(_tensors(outputs), start)
        names = [n.op.name for n in self.nodes]
        if [n.op.name for n in fresh] != names:
            raise RecomputeError(
                with_location(
                    "checkpoint: the recomputed segment ran other ops than the forward "
                    f"({len(fresh)} recorded ops, {len(names)} expected); the function must "
                    "compute the same way every time it runs on the same inputs"
                )
            )
        for old, new in zip(self.nodes, fresh):
            if old.released:
                continue
            if isinstance(old.saved_inputs, _Pending):
                old.saved_inputs = new.saved_inputs
            if isinstance(old.saved_outputs, _Pending):
                old.saved_outputs = new.saved_outputs
        self.nodes = []
        self.args, self.kwargs = (), {}  # the segment's inputs are no longer needed here


def _devices(args: Iterable[Any]) -> list[Device]:
    devices = [Device("cpu")]
    for a in args:
        if isinstance(a, Tensor) and a.device not in devices:
            devices.append(a.device)
    return devices


def checkpoint(
    function: Callable,
    *args: Any,
    use_reentrant: bool | None = None,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    """``function(*args, **kwargs)`` whose activations are recomputed in backward, not kept.

    PyTorch's meaning: gradients (first and higher order) are those of the plain call; with
    ``preserve_rng_state`` the re-run draws the same random numbers (dropout masks). Both values
    of ``use_reentrant`` run the non-reentrant form (it supports ``grad()`` and double backward,
    and needs no input that requires grad). Under ``no_grad`` it is the plain call.

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor([1.0, 2.0], requires_grad=True)
        >>> y = checkpoint(lambda t: (t.exp() * t).sum(), x)
        >>> y.backward(); [round(g, 4) for g in x.grad.tolist()]
        [5.4366, 22.1672]
    """
    del use_reentrant  # one implementation serves both (see above)
    if not config.grad_enabled:
        return function(*args, **kwargs)
    rng = _RngSnapshot(_devices(args)) if preserve_rng_state else None
    start = next_seq()
    outputs = function(*args, **kwargs)
    segment = _Segment(function, args, kwargs, rng)
    segment.forget(_inner_nodes(_tensors(outputs), start))
    return outputs


def _run_range(functions: list, start: int, end: int) -> Callable:
    def forward(x: Any) -> Any:
        for j in range(start, end + 1):
            x = functions[j](x)
        return x

    return forward


def checkpoint_sequential(
    functions: Any,
    segments: int,
    input: Any,
    use_reentrant: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Run a sequence of modules (or a ``Sequential``) in ``segments`` chunks, checkpointing
    every chunk but the last (PyTorch's ``checkpoint_sequential``, its chunking included).

    Example:
        >>> import dualflow
        >>> from dualflow import nn
        >>> net = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
        >>> x = dualflow.ones(2, 3)
        >>> bool(dualflow.allclose(checkpoint_sequential(net, 2, x), net(x)))
        True
    """
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise TypeError(f"checkpoint_sequential: unexpected arguments {sorted(kwargs)}")
    if hasattr(functions, "children") and callable(functions.children):
        functions = list(functions.children())
    functions = list(functions)
    if not isinstance(segments, int) or not 1 <= segments <= max(len(functions), 1):
        raise ValueError(
            f"checkpoint_sequential: segments must be an int in [1, {len(functions)}] (the "
            f"number of functions), got {segments!r}"
        )
    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        run = _run_range(functions, start, end)
        input = checkpoint(run, input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return _run_range(functions, end + 1, len(functions) - 1)(input)

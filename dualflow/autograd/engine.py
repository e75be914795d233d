"""The backward engine: ``backward()`` into ``.grad`` and ``grad()`` returning gradients.

Nodes run in reverse creation order (a node is always created after its inputs' creators, so this
is a reverse topological order), gradients of a value used several times are summed, broadcasting
is undone once here with ``sum_to``, and each node is released right after its backward ran unless
``retain_graph`` (Chainer's memory-efficient backprop). With ``create_graph`` the backward's own
ops are recorded, so gradients can be differentiated again. A backward may return a
``ZeroGradient`` (a symbolic zero): it adds nothing to a sum, a node that gets only such zeros
passes them on without running, and zeros are made only where a gradient is handed out.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from heapq import heappop, heappush
from typing import Any

from dualflow import ops
from dualflow._config import config, using_config
from dualflow._undo import current as undo_current
from dualflow.autograd.eager import check_finite
from dualflow.autograd.observers import Observation, start_observing
from dualflow.errors import ShapeError, with_location
from dualflow.ops.creation import ZeroGradient
from dualflow.ops.dispatch import tracing
from dualflow.symbolic_shapes import ACTIVE as SYMBOLIC_TRACES
from dualflow.tensor.core import Tensor, as_tensor
from dualflow.tensor.tape import GraphReleasedError, Node
from dualflow.tensor.tape import edge as edge_of

_seq = operator.attrgetter("seq")


def _seed_gradient(output: Tensor, gy: Any) -> Tensor:
    if gy is None:
        if output.numel() != 1:
            raise ShapeError(
                with_location(
                    "backward: a gradient can be created implicitly only for one-element "
                    f"outputs, got shape {output.shape}; pass gy with that shape"
                )
            )
        return ops.ones_like(output)  # an op, so a trace records it instead of a constant
    gy = as_tensor(gy)
    if gy.shape != output.shape:
        raise ShapeError(
            with_location(
                f"backward: gy has shape {gy.shape} but the output has shape {output.shape}"
            )
        )
    return gy


def _add(old: Any, gx: Any) -> Any:
    """``old + gx`` where either may be None (no gradient yet) or a symbolic ``ZeroGradient``."""
    if type(gx) is ZeroGradient:
        return gx if old is None else old
    if old is None or type(old) is ZeroGradient:
        return gx
    return old + gx


def _saving_grad(leaf: Tensor) -> None:
    """An all-or-nothing eager call (``dualflow._undo``) saves ``leaf.grad`` before it changes."""
    log = undo_current()
    if log is not None:
        log.grad(leaf)


class _Run:
    """The state of one backward pass."""

    def __init__(self, targets: dict | None, reach: dict | None, retain: bool) -> None:
        # grad(): ``reach`` maps each node below which a target lies to its ``needs``; None
        # when every node reaches one through each of its inputs (``_reaching``), as backward()
        self.pending: dict[Node, list] = {}
        self.heap: list = []
        self.targets, self.reach, self.retain = targets, reach, retain
        self.found: dict[Any, Tensor] = {}

    def push(self, edge: Any, gx: Tensor) -> None:
        if type(edge) is tuple:
            node, index = edge
            slot = self.pending.get(node)
            if slot is None:
                slot = self.pending[node] = [None] * node.op.nout
                heappush(self.heap, (-node.seq, node))
            slot[index] = _add(slot[index], gx)
        elif self.targets is None:  # backward(): accumulate into the leaf's .grad
            if type(gx) is ZeroGradient:  # zeros where it had no gradient (as PyTorch's)
                if tracing() is None:
                    if edge.raw_grad is None:
                        _saving_grad(edge)
                        edge.raw_grad = ops.zeros_like(edge)
                elif edge.grad is None:
                    edge.grad = ops.zeros_like(edge)
                return
            if gx.dtype != edge.dtype:
                gx = ops.cast(gx, edge.dtype)
            if tracing() is None:  # skip the .grad property's tracing hook
                _saving_grad(edge)
                edge.raw_grad = gx if edge.raw_grad is None else edge.raw_grad + gx
            else:
                edge.grad = gx if edge.grad is None else edge.grad + gx
        elif id(edge) in self.targets:
            self.found[id(edge)] = _add(self.found.get(id(edge)), gx)

    def run(self) -> None:
        debug = config.debug
        tracer = tracing()
        heap, pending, targets, reach = self.heap, self.pending, self.targets, self.reach
        # grad(): the nodes one of whose outputs is a target (their gradient is an answer)
        answers = {k[0] for k in targets if type(k) is tuple} if targets is not None else ()
        run_node = self.run_node  # bound once: this loop runs for every node
        while heap:
            node = heappop(heap)[1]
            gys = pending.pop(node)
            if tracer is not None:  # the ops of this backward belong to the node's forward op
                tracer.on_backward_node(node)
            if targets is not None:
                if node in answers:
                    for index, gy in enumerate(gys):
                        if (node, index) in targets and gy is not None:
                            self.found[(node, index)] = gy
                if reach is not None and node not in reach:
                    continue
            run_node(node, gys, debug)
        if tracer is not None:
            tracer.on_backward_node(None)

    def run_node(self, node: Node, gys: list, debug: bool) -> None:
        edges = node.edges
        if edges is None:
            raise GraphReleasedError(
                with_location(
                    f"backward through {node.op.name} a second time, but its saved values were "
                    "freed by the first backward; call backward(retain_graph=True) the first time"
                )
            )
        reach = self.reach
        for gy in gys:  # one short loop on the hot path: symbolic zeros are rare
            if type(gy) is ZeroGradient:
                gxs = self._with_zeros(node, gys, debug)
                break
        else:
            if debug:
                gxs = self._backward(node, gys, debug)
            else:  # _backward without its frame: this runs for every node
                node.needs = None if reach is None else reach[node]
                gxs = node.op.backward(node, *gys)
                if type(gxs) is not tuple:
                    gxs = (gxs,)
        pending, targets = self.pending, self.targets
        for edge, gx, shape in zip(edges, gxs, node.in_shapes):
            if edge is None or gx is None:
                continue
            if type(gx) is ZeroGradient:
                gx = ZeroGradient(gx.like, shape)
            elif _differs(gx.shape, shape) if SYMBOLIC_TRACES[0] else gx.raw_array.shape != shape:
                gx = ops.sum_to(gx, shape)
            if type(edge) is tuple:  # the common case, inlined (``push``)
                creator, index = edge
                if reach is not None and creator not in reach and edge not in targets:
                    continue  # grad(): no target below it
                slot = pending.get(creator)
                if slot is None:
                    slot = pending[creator] = [None] * creator.op.nout
                    heappush(self.heap, (-creator.seq, creator))
                old = slot[index]
                slot[index] = gx if old is None else _add(old, gx)
            elif targets is None or id(edge) in targets:
                self.push(edge, gx)
        if not self.retain:
            node.release()

    def _with_zeros(self, node: Node, gys: list, debug: bool) -> tuple:
        """The inputs' gradients when some of ``gys`` are symbolic zeros: symbolic zeros too
        when every other one is None (nothing to compute), else the backward on real zeros."""
        zero = _only_zeros(gys)
        if zero is not None:
            return tuple([zero] * len(node.edges))
        gys = [g.materialize() if type(g) is ZeroGradient else g for g in gys]
        return self._backward(node, gys, debug)

    def _backward(self, node: Node, gys: list, debug: bool) -> tuple:
        """The node's backward on ``gys``: its inputs' gradients, one per edge."""
        node.needs = None if self.reach is None else self.reach[node]
        if debug:  # check the gradients below, naming this node's op and forward line
            with using_config(debug=False):
                gxs = node.op.backward(node, *gys)
        else:
            gxs = node.op.backward(node, *gys)
        if type(gxs) is not tuple:
            gxs = (gxs,)
        if debug:
            arrays = tuple(
                g.raw_array for g in gxs if g is not None and type(g) is not ZeroGradient
            )
            check_finite(node.op, arrays, "gradient", node.loc)
        return gxs


def _only_zeros(gys: list) -> ZeroGradient | None:
    """A symbolic zero of ``gys`` when there is one and every other entry is None, else None."""
    zero = None
    for g in gys:
        if g is None:
            continue
        if type(g) is not ZeroGradient:
            return None
        zero = g
    return zero


class _ObservedRun(_Run):
    """A backward whose leaves some observer watches (it is told as each one is final)."""

    def __init__(self, retain: bool, observation: Observation) -> None:
        super().__init__(None, None, retain)
        self.observation = observation

    def run_node(self, node: Node, gys: list, debug: bool) -> None:
        edges = node.edges  # released by the node's backward unless retained
        super().run_node(node, gys, debug)
        self.observation.after(edges)


def backward(
    outputs: Sequence[Tensor],
    grad_outputs: Sequence[Any] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
) -> None:
    """Accumulate gradients of ``outputs`` into ``.grad`` of every leaf that requires grad.

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor(2.0, requires_grad=True)
        >>> backward([x * x]); x.grad.item()
        4.0
    """
    grad_outputs = grad_outputs or [None] * len(outputs)
    if not any(out.requires_grad for out in outputs):
        raise RuntimeError(
            with_location(
                "backward: the output does not require grad (no input required grad, or it was "
                "computed under no_grad()); create leaves with requires_grad=True"
            )
        )
    retain = create_graph if retain_graph is None else retain_graph
    # observers (the multi-node optimizer's bucket reducer) see plain backward passes only
    observation = None if create_graph else start_observing(outputs)
    run = _Run(None, None, retain) if observation is None else _ObservedRun(retain, observation)
    try:
        with using_config(grad_enabled=create_graph, autocast=None):  # backward: forward's types
            for out, gy in zip(outputs, grad_outputs):
                if out.requires_grad:
                    run.push(edge_of(out), _seed_gradient(out, gy))
            run.run()
    except BaseException:
        if observation is not None:
            observation.fail()
        raise
    if observation is not None:
        observation.finish()


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    create_graph: bool = False,
    retain_graph: bool | None = None,
    allow_unused: bool | None = None,
    only_inputs: bool = True,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Gradients of ``outputs`` w.r.t. ``inputs``, without touching any ``.grad`` (PyTorch's
    signature: ``only_inputs`` is ignored, as there; ``materialize_grads`` gives zeros, not None).

    Example:
        >>> import dualflow
        >>> x = dualflow.tensor(3.0, requires_grad=True)
        >>> (g,) = grad(x ** 3, x, create_graph=True)   # 3x^2
        >>> grad(g, x)[0].item()                        # 6x
        18.0
    """
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs] * len(outputs) if grad_outputs is None else [grad_outputs]
    keys = []
    for t in inputs:
        if not t.requires_grad:
            raise ValueError(with_location("grad: an input does not require grad"))
        key = edge_of(t)  # a leaf's key is its id: the engine's targets hash what it pushes
        keys.append(id(t) if key is t else key)
    targets = dict.fromkeys(keys)
    retain = create_graph if retain_graph is None else retain_graph
    run = _Run(targets, _reaching(outputs, targets), retain)
    with using_config(grad_enabled=create_graph, autocast=None):  # backward: forward's types
        for out, gy in zip(outputs, grad_outputs):
            if out.requires_grad:
                run.push(edge_of(out), _seed_gradient(out, gy))
        run.run()
    result = tuple(  # in the input's dtype; materialize_grads: zeros for unused inputs
        (ops.zeros_like(t) if materialize_grads else None) if g is None
        else ops.zeros_like(t) if type(g) is ZeroGradient
        else g if g.dtype == t.dtype else ops.cast(g, t.dtype)
        for g, t in zip((run.found.get(k) for k in keys), inputs)
    )  # fmt: skip
    if not (allow_unused or materialize_grads) and any(g is None for g in result):
        raise ValueError(
            with_location(
                "grad: an input was not used to compute the outputs; pass allow_unused=True to get "
                "None for it"
            )
        )
    return result


def _reaching(outputs: Iterable[Tensor], targets: dict) -> dict[Node, tuple[bool, ...]] | None:
    """The nodes from which some target can be reached (only those need to run backward), each
    with its ``needs``: which of its inputs lead to a target (an edge into a reached node, a
    target output, or a target leaf), what its backward is asked to compute. None when every
    leaf below ``outputs`` is a target: every node then reaches one through each input that
    has an edge (each path down ends at a leaf), which is what backward() asks of a node."""
    edges_of: dict[Node, tuple] = {}
    leaves_all_targets = True  # the common grad(loss, params): the sort and needs below skipped
    stack = [t.creator for t in outputs if t.creator is not None]
    while stack:
        node = stack.pop()
        if node in edges_of:
            continue
        edges = node.edges
        if edges is None:
            raise GraphReleasedError(
                with_location(
                    f"grad through {node.op.name}, whose saved values an earlier backward freed; "
                    "pass retain_graph=True to the first backward/grad call"
                )
            )
        edges_of[node] = edges
        for e in edges:
            if type(e) is tuple:
                if e[0] not in edges_of:
                    stack.append(e[0])
            elif e is not None and leaves_all_targets and id(e) not in targets:
                leaves_all_targets = False
    if leaves_all_targets:
        return None
    reach: dict[Node, tuple[bool, ...]] = {}
    for node in sorted(edges_of, key=_seq):  # inputs' creators first
        needs = []
        for edge in edges_of[node]:
            if type(edge) is tuple:
                needs.append(edge[0] in reach or edge in targets)
            else:
                needs.append(edge is not None and id(edge) in targets)
        if True in needs:
            reach[node] = tuple(needs)
    return reach


def _differs(shape: tuple, wanted: tuple) -> bool:
    """Whether a gradient's shape (sizes maybe expressions) differs from its input's: lengths
    first, as comparing ``(s0, 5)`` with ``(5,)`` element by element would guard ``s0 == 5``."""
    return len(shape) != len(wanted) or shape != wanted

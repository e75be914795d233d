"""``create_multi_node_optimizer``: average gradients over the ranks, then run the wrapped update.

Gradients are packed into flat buckets in **reverse model order** when a model (or a name ->
parameter mapping) is given, so every rank builds identical buckets whatever its param-group order
and the last layers' gradients, which backward produces first, fill the first bucket; otherwise in
reverse param-group order. Each bucket holds at most ``bucket_mb`` MiB and is one ``allreduce``
op; everything is dualflow ops, so a compiled step traces it. With ``overlap`` (the default) the
buckets are reduced during backward by a ``GradReducer`` (PyTorch DDP's scheme).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

from dualflow import arguments, ops
from dualflow._config import enable_grad, no_grad
from dualflow.distributed.agreement import CollectiveMismatch
from dualflow.distributed.communicator import Communicator
from dualflow.distributed.layout import explain_layouts
from dualflow.distributed.reducer import GradReducer
from dualflow.ops.collective import agreed_collectives

_TRANSFER_DTYPES = (None, "float16", "float32", "float64")


class Bucket(NamedTuple):
    """One all-reduce: parameter positions (packing order), transfer dtype and its bytes."""

    positions: tuple[int, ...]
    dtype: str
    nbytes: int


def plan_buckets(
    specs: list[tuple[tuple[int, ...], str]], bucket_bytes: int, grad_dtype: str | None = None
) -> list[Bucket]:
    """Greedy, order-preserving packing of ``(shape, dtype)`` gradients into capped buckets.

    A bucket closes when the next gradient would overflow it or has another transfer dtype; a
    gradient larger than the cap gets a bucket of its own.

    Example:
        >>> specs = [((10,), "float32"), ((20,), "float32"), ((5,), "float32")]
        >>> [b.positions for b in plan_buckets(specs, bucket_bytes=100)]
        [(0,), (1, 2)]
        >>> [b.nbytes for b in plan_buckets(specs, bucket_bytes=120)]
        [120, 20]
    """
    buckets: list[Bucket] = []
    current: list[int] = []
    current_dtype, used = "", 0
    for position, (shape, dtype) in enumerate(specs):
        wire = grad_dtype or dtype
        nbytes = math.prod(shape) * np.dtype(wire).itemsize
        if current and (wire != current_dtype or used + nbytes > bucket_bytes):
            buckets.append(Bucket(tuple(current), current_dtype, used))
            current, used = [], 0
        current.append(position)
        current_dtype, used = wire, used + nbytes
    if current:
        buckets.append(Bucket(tuple(current), current_dtype, used))
    return buckets


class MultiNodeOptimizer:
    """Wraps ``optimizer``: ``step()`` first averages every gradient over ``comm``'s ranks.

    A parameter without a gradient on this rank contributes zeros, so every rank issues the
    same all-reduces; after ``step()`` every parameter has the averaged gradient (zeros where
    no rank had one). Other attributes (``state``, ``lr_tensor``...) are the wrapped one's.
    ``names`` (name -> parameter) switches the packing order from param-group order to names.
    """

    def __init__(
        self,
        optimizer: Any,
        comm: Communicator,
        bucket_mb: float,
        grad_dtype: str | None,
        names: Mapping[str, Any] | None = None,
        overlap: bool = True,
    ) -> None:
        if grad_dtype is not None:
            grad_dtype = np.dtype(grad_dtype).name
        if grad_dtype not in _TRANSFER_DTYPES:
            raise ValueError(f"grad_dtype must be one of {_TRANSFER_DTYPES}, got {grad_dtype!r}")
        # finite: NaN passed a "<= 0" check and failed later inside int()
        bucket_mb = arguments.real(
            "create_multi_node_optimizer",
            "bucket_mb",
            bucket_mb,
            0.0,
            open_low=True,
            what="MiB per all-reduce",
        )
        self.optimizer, self.comm, self.grad_dtype = optimizer, comm, grad_dtype
        self.bucket_bytes = int(bucket_mb * 2**20)
        # Keep the parameters themselves (not only ids) so an id is never reused while mapped.
        self._named = dict(names) if names is not None else None
        self._name_of = {id(p): n for n, p in (self._named or {}).items()}
        self._order = {id(p): i for i, p in enumerate((self._named or {}).values())}
        self._plan_key: tuple = ()
        self._buckets: list[Bucket] = []
        self.reducer = GradReducer(self) if overlap else None

    # ----- the wrapped optimizer's surface ------------------------------------------------------
    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's ``.grad``: None, or zeros with ``set_to_none=False``
        (the wrapped optimizer's ``zero_grad``, PyTorch's signature)."""
        if self.reducer is not None:
            self.reducer.averaged = False
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        """The wrapped optimizer's state dict (identical on every rank after each step)."""
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load into the wrapped optimizer."""
        self.optimizer.load_state_dict(state_dict)

    def __getattr__(self, name: str) -> Any:
        if name == "optimizer":  # not set yet (during unpickling): avoid infinite recursion
            raise AttributeError(name)
        return getattr(self.optimizer, name)

    # ----- stepping ----------------------------------------------------------------------------
    def named_params(self) -> list[tuple[str, Any]]:
        """Every optimized parameter with its name, in packing order: reverse model order.

        Without a model the names are ``param_groups[g][i]`` and the order is reverse
        param-group order. Backward computes the last layers' gradients first, so these fill
        the first bucket, which can then start while the rest of backward runs.

        Raises:
            ValueError: a model was given and an optimized parameter is not one of its.

        Example:
            >>> from dualflow import nn, optim
            >>> from dualflow.distributed import create_communicator
            >>> model = nn.Linear(2, 3)
            >>> sgd = optim.SGD(list(model.params())[::-1], lr=0.1)  # bias first
            >>> comm = create_communicator("loopback")
            >>> [n for n, _ in create_multi_node_optimizer(sgd, comm, model=model).named_params()]
            ['bias', 'weight']
            >>> [n for n, _ in create_multi_node_optimizer(sgd, comm).named_params()]
            ['param_groups[0][1]', 'param_groups[0][0]']
        """
        pairs = []
        for g, group in enumerate(self.optimizer.param_groups):
            for i, p in enumerate(group["params"]):
                if self._named is None:
                    pairs.append((f"param_groups[{g}][{i}]", p))
                elif id(p) in self._name_of:
                    pairs.append((self._name_of[id(p)], p))
                else:
                    raise ValueError(
                        f"multi-node optimizer: parameter #{i} of param group {g} (shape "
                        f"{tuple(p.shape)}) is not among the model's named parameters; pass the "
                        "model that owns every optimized parameter"
                    )
        if self._named is not None:  # the model's order: the same on every rank
            pairs.sort(key=lambda pair: self._order[id(pair[1])])
        return pairs[::-1]

    def params(self) -> list[Any]:
        """Every optimized parameter, in packing order (see ``named_params``)."""
        return [p for _, p in self.named_params()]

    @property
    def buckets(self) -> list[Bucket]:
        """The bucket plan for the current parameters, agreed by every rank (a collective).

        Every call checks a checksum of the (name, shape, dtype) list, the bucket settings and
        the communicator's count of optimizer steps with the other ranks, so all ranks take the
        same branch even when only one rank's parameter set changed; a difference raises naming
        the first mismatching parameter (or the settings, or the step counts).
        Gradients are not part of the layout (a missing one is zero-filled). Once agreed, the
        buckets' all-reduces pair one to one on every rank and skip their own checks.
        """
        self.agree_layout()
        return self.local_buckets()

    def local_buckets(self) -> list[Bucket]:
        """This rank's bucket plan, without asking the others (``buckets`` agrees on it first)."""
        named = self.named_params()
        key = tuple((id(p), tuple(p.shape), str(p.dtype)) for _, p in named)
        if key != self._plan_key:
            shapes = [(shape, dtype) for _, shape, dtype in key]
            self._buckets = plan_buckets(shapes, self.bucket_bytes, self.grad_dtype)
            self._plan_key = key
        return self._buckets

    def agree_layout(self) -> None:
        """Check the layout, the bucket settings and the step count with every rank.

        Raises:
            CommunicatorError: on every rank, naming what differs.
        """
        specs = [(name, tuple(p.shape), str(p.dtype)) for name, p in self.named_params()]
        settings = (self.bucket_bytes, self.grad_dtype)
        checksum = zlib.crc32(repr((specs, settings)).encode())
        steps = self.comm.optimizer_steps
        what = f"layout check of the multi-node optimizer (step {steps}) [{checksum:08x}]"
        try:
            self.comm.agree(what)
        except CollectiveMismatch as exc:
            if all(p.text.startswith("layout check") for p in exc.positions):
                # every rank is here: say what differs (the parameter, settings or step count)
                everyone = self.comm.allgather((specs, settings, steps), "layout details")
                explain_layouts(everyone)
            raise

    def allreduce_grads(self) -> None:
        """Replace every parameter's ``.grad`` by its average over the ranks.

        Example:
            >>> import numpy as np
            >>> from dualflow import optim
            >>> from dualflow.nn import Parameter
            >>> from dualflow.distributed import create_communicator
            >>> p = Parameter(np.ones(2, np.float32))
            >>> comm = create_communicator("loopback")
            >>> opt = create_multi_node_optimizer(optim.SGD([p], lr=1.0), comm)
            >>> opt.allreduce_grads(); p.grad.tolist()  # no gradient anywhere: zeros
            [0.0, 0.0]
        """
        buckets = self.buckets  # first: it raises before any collective if the ranks differ
        params = self.params()
        with no_grad(), agreed_collectives(self.comm):
            for index, bucket in enumerate(buckets):
                members = [params[i] for i in bucket.positions]
                flat = self.pack(members)
                self.unpack(members, ops.allreduce(flat, self.comm, "mean", bucket=index))

    def pack(self, members: list[Any]) -> Any:
        """One flat tensor of the members' gradients (zeros for a missing one), in wire dtype."""
        flats = [ops.reshape(_grad_or_zeros(p), (-1,)) for p in members]
        flat = flats[0] if len(flats) == 1 else ops.concat(flats)
        if self.grad_dtype is not None and self.grad_dtype != str(members[0].dtype):
            # The mean is taken in the transfer dtype so each cast stands alone: a fused
            # elementwise region holding float16 would need a numba kernel, and numba has no
            # float16.
            flat = ops.cast(flat, self.grad_dtype)
        return flat

    def unpack(self, members: list[Any], reduced: Any) -> None:
        """Set each member's ``.grad`` to its part of the reduced flat tensor ``reduced``."""
        dtype = str(members[0].dtype)
        if str(reduced.dtype) != dtype:
            reduced = ops.cast(reduced, dtype)
        offset = 0
        for p in members:
            n = math.prod(p.shape)
            piece = (
                reduced if len(members) == 1 else ops.getitem(reduced, slice(offset, offset + n))
            )
            p.grad = ops.reshape(piece, tuple(p.shape))
            offset += n

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Run ``closure`` (if given), average the gradients, then the wrapped ``step()``.

        Example:
            >>> import numpy as np
            >>> import dualflow
            >>> from dualflow import optim
            >>> from dualflow.nn import Parameter
            >>> from dualflow.distributed import create_communicator
            >>> p = Parameter(np.array([1.0], np.float32))
            >>> comm = create_communicator("loopback")
            >>> opt = create_multi_node_optimizer(optim.SGD([p], lr=0.5), comm)
            >>> p.grad = dualflow.tensor([2.0]); opt.step(); p.tolist()
            [0.0]
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if self.reducer is not None and self.reducer.averaged:
            self.reducer.averaged = False  # backward already averaged
        else:
            self.allreduce_grads()
        self.optimizer.step()
        # The ranks compare this count at every layout check, every compiled call's vote and at
        # exit: a rank that skipped step() (after its backward already averaged) is caught there.
        # It is a tensor write, so a compiled step's plan counts too, and a failed call undoes it.
        groups = self.optimizer.param_groups
        first = next((g["params"][0] for g in groups if g["params"]), None)
        self.comm.count_optimizer_step(first)
        return loss

    def __repr__(self) -> str:
        return f"MultiNodeOptimizer({self.comm!r}, {self.optimizer!r})"


def _grad_or_zeros(p: Any) -> Any:
    grad = p.grad
    return ops.zeros_like(p) if grad is None else grad  # on p's device (GPU params too)


def _name_map(model: Any, named_params: Any) -> dict[str, Any] | None:
    if model is not None and named_params is not None:
        raise ValueError("pass model= or named_params=, not both")
    if model is not None:
        return dict(model.named_params())
    if named_params is None:
        return None
    pairs = named_params.items() if isinstance(named_params, Mapping) else named_params
    return dict(pairs)


def create_multi_node_optimizer(
    optimizer: Any,
    comm: Communicator,
    bucket_mb: float = 25,
    grad_dtype: str | None = None,
    *,
    model: Any = None,
    named_params: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None,
    overlap: bool = True,
) -> MultiNodeOptimizer:
    """Wrap ``optimizer`` so each ``step()`` uses gradients averaged over ``comm``'s ranks.

    Gradients travel in flat buckets. With ``model`` (or ``named_params``) they are packed
    sorted by dotted parameter name, so the buckets agree across ranks whatever order each
    rank's optimizer lists its parameters in; without, they are packed in param-group order,
    which every rank must then share. The layout is checked across ranks when it changes.

    Args:
        optimizer: any ``dualflow.optim.Optimizer``.
        comm: the communicator (same on every rank).
        bucket_mb: cap of one flat all-reduce bucket, in MiB.
        grad_dtype: transfer dtype (e.g. ``"float16"`` halves traffic); cast back to each
            parameter's dtype after the reduction. None sends the gradients' own dtype.
        model: the module owning the optimized parameters (its ``named_params()`` names them).
        named_params: instead of ``model``: a name -> parameter mapping (or pairs), in the
            model's order.
        overlap: average during backward, each bucket starting as soon as its gradients exist
            (``.grad`` is averaged when ``backward()`` returns, as with PyTorch DDP); False
            averages in ``step()``.

    Raises:
        ValueError: both ``model`` and ``named_params``, or a bad ``grad_dtype``/``bucket_mb``
            (``bucket_mb``: ArgumentError unless a finite number > 0).

    Example:
        >>> import numpy as np
        >>> from dualflow import optim
        >>> from dualflow.nn import Parameter
        >>> from dualflow.distributed import create_communicator
        >>> opt = optim.SGD([Parameter(np.ones(2, np.float32))], lr=0.1)
        >>> create_multi_node_optimizer(opt, create_communicator("loopback")).buckets
        [Bucket(positions=(0,), dtype='float32', nbytes=8)]
    """
    names = _name_map(model, named_params)
    return MultiNodeOptimizer(optimizer, comm, bucket_mb, grad_dtype, names, overlap)

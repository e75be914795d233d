"""``create_multi_node_optimizer``: average gradients over the ranks, then run the wrapped update.

Gradients are packed into flat buckets in **parameter order across the param groups** (the order
every rank gets from building the same model), each bucket at most ``bucket_mb`` megabytes, with
one ``allreduce`` op per bucket. Everything is dualflow ops, so a compiled step traces it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from dualflow import ops
from dualflow._config import enable_grad, no_grad
from dualflow.distributed.communicator import Communicator
from dualflow.errors import CommunicatorError

_TRANSFER_DTYPES = (None, "float16", "float32", "float64")


class Bucket(NamedTuple):
    """One all-reduce: parameter positions (param-group order), transfer dtype and its bytes."""

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
    """

    def __init__(
        self, optimizer: Any, comm: Communicator, bucket_mb: float, grad_dtype: str | None
    ) -> None:
        if grad_dtype is not None:
            grad_dtype = np.dtype(grad_dtype).name
        if grad_dtype not in _TRANSFER_DTYPES:
            raise ValueError(f"grad_dtype must be one of {_TRANSFER_DTYPES}, got {grad_dtype!r}")
        if bucket_mb <= 0:
            raise ValueError(f"bucket_mb must be > 0, got {bucket_mb}")
        self.optimizer, self.comm, self.grad_dtype = optimizer, comm, grad_dtype
        self.bucket_bytes = int(bucket_mb * 2**20)
        self._plan_key: tuple = ()
        self._buckets: list[Bucket] = []

    # ----- the wrapped optimizer's surface ------------------------------------------------------
    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    def zero_grad(self) -> None:
        """Clear every parameter's ``.grad`` (the wrapped optimizer's ``zero_grad``)."""
        self.optimizer.zero_grad()

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
    def params(self) -> list[Any]:
        """Every parameter, in param-group order (the packing order)."""
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    @property
    def buckets(self) -> list[Bucket]:
        """The bucket plan for the current parameters (checked against every rank once)."""
        params = self.params()
        key = tuple((id(p), tuple(p.shape), str(p.dtype)) for p in params)
        if key != self._plan_key:
            specs = [(tuple(p.shape), str(p.dtype)) for p in params]
            _check_same_everywhere(self.comm, specs)
            self._buckets = plan_buckets(specs, self.bucket_bytes, self.grad_dtype)
            self._plan_key = key
        return self._buckets

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
        params = self.params()
        with no_grad():
            for bucket in self.buckets:
                self._reduce_bucket([params[i] for i in bucket.positions])

    def _reduce_bucket(self, members: list[Any]) -> None:
        flats = [ops.reshape(_grad_or_zeros(p), (-1,)) for p in members]
        flat = flats[0] if len(flats) == 1 else ops.concat(flats)
        dtype = str(members[0].dtype)
        if self.grad_dtype is None or self.grad_dtype == dtype:
            reduced = ops.allreduce(flat, self.comm, "mean")
        else:
            # The mean is taken in the transfer dtype so each cast stands alone: a fused
            # elementwise region holding float16 would need a numba kernel, and numba has no
            # float16.
            wire = ops.allreduce(ops.cast(flat, self.grad_dtype), self.comm, "mean")
            reduced = ops.cast(wire, dtype)
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
        self.allreduce_grads()
        self.optimizer.step()
        return loss

    def __repr__(self) -> str:
        return f"MultiNodeOptimizer({self.comm!r}, {self.optimizer!r})"


def _grad_or_zeros(p: Any) -> Any:
    grad = p.grad
    return ops.zeros(tuple(p.shape), dtype=str(p.dtype)) if grad is None else grad


def _check_same_everywhere(comm: Communicator, specs: list[tuple]) -> None:
    everyone = comm.allgather(specs)
    for rank, theirs in enumerate(everyone):
        if theirs != everyone[0]:
            first = next(
                (i for i, (a, b) in enumerate(zip(everyone[0], theirs)) if a != b),
                min(len(theirs), len(everyone[0])),
            )
            raise CommunicatorError(
                f"multi-node optimizer: rank {rank}'s parameters differ from rank 0's at "
                f"position {first} (rank 0: {len(everyone[0])} parameters, rank {rank}: "
                f"{len(theirs)}); every rank must optimize the same model"
            )


def create_multi_node_optimizer(
    optimizer: Any,
    comm: Communicator,
    bucket_mb: float = 25,
    grad_dtype: str | None = None,
) -> MultiNodeOptimizer:
    """Wrap ``optimizer`` so each ``step()`` uses gradients averaged over ``comm``'s ranks.

    Args:
        optimizer: any ``dualflow.optim.Optimizer``.
        comm: the communicator (same on every rank).
        bucket_mb: cap of one flat all-reduce bucket, in MiB.
        grad_dtype: transfer dtype (e.g. ``"float16"`` halves traffic); cast back to each
            parameter's dtype after the reduction. None sends the gradients' own dtype.

    Example:
        >>> import numpy as np
        >>> from dualflow import optim
        >>> from dualflow.nn import Parameter
        >>> from dualflow.distributed import create_communicator
        >>> opt = optim.SGD([Parameter(np.ones(2, np.float32))], lr=0.1)
        >>> create_multi_node_optimizer(opt, create_communicator("loopback")).buckets
        [Bucket(positions=(0,), dtype='float32', nbytes=8)]
    """
    return MultiNodeOptimizer(optimizer, comm, bucket_mb, grad_dtype)

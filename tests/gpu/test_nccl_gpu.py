"""The NCCL communicator in one process (MPI singleton, one GPU): all-reduce of cupy arrays (sum,
mean, ``out=``, dtypes, non-contiguous input), broadcast, the differentiable ``allreduce`` op on
device tensors, and a multi-node optimizer step, including a parameter without a gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import nn, ops, optim
from dualflow.distributed import create_multi_node_optimizer

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def comm() -> Any:
    nccl = pytest.importorskip("cupy.cuda.nccl")
    if not getattr(nccl, "available", False):
        pytest.skip("cupy.cuda.nccl is unavailable (libnccl.so.2): pip install nvidia-nccl-cu12")
    pytest.importorskip("mpi4py")
    from dualflow.distributed import create_communicator

    return create_communicator("nccl", abort_on_exception=False)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64"])
def test_allreduce_of_cupy_arrays(comm: Any, cupy: Any, dtype: str) -> None:
    assert comm.name == "nccl" and comm.size == 1 and comm.rank == 0
    x = cupy.arange(10).astype(dtype)
    total = comm.allreduce(x)
    assert isinstance(total, cupy.ndarray) and total is not x and total.dtype == x.dtype
    np.testing.assert_array_equal(total.get(), x.get())
    out = cupy.zeros_like(x)
    assert comm.allreduce(x, out=out) is out
    np.testing.assert_array_equal(out.get(), x.get())
    if dtype.startswith("float"):
        np.testing.assert_array_equal(comm.allreduce(x, "mean").get(), x.get())


def test_allreduce_of_a_non_contiguous_array_and_bcast(comm: Any, cupy: Any) -> None:
    x = cupy.arange(12, dtype=cupy.float32).reshape(3, 4).T
    np.testing.assert_array_equal(comm.allreduce(x).get(), x.get())
    a = cupy.arange(5, dtype=cupy.float64)
    assert comm.bcast(a) is a
    np.testing.assert_array_equal(a.get(), np.arange(5.0))
    assert comm.bcast({"lr": 0.1}) == {"lr": 0.1}  # objects go over MPI


def test_allreduce_op_on_device_tensors_is_differentiable(comm: Any) -> None:
    x = dualflow.tensor([1.0, 2.0, 3.0], device="cuda:0", requires_grad=True)
    y = ops.allreduce(x, comm, "sum")
    assert y.device == x.device
    (y * y).sum().backward()
    assert x.grad.device == x.device and x.grad.tolist() == [2.0, 4.0, 6.0]


def test_multi_node_optimizer_step_on_gpu(comm: Any) -> None:
    model = nn.Linear(3, 2).to_device("cuda:0")
    opt = create_multi_node_optimizer(optim.SGD(list(model.params()), lr=0.5), comm)
    x = dualflow.tensor(np.ones((4, 3), np.float32), device="cuda:0")
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    model(x).sum().backward()
    grads = {k: v.grad.numpy() for k, v in model.named_params()}
    opt.step()  # one rank: the average is the gradient itself
    for name, p in model.named_params():
        assert p.device == x.device
        np.testing.assert_allclose(p.numpy(), before[name] - 0.5 * grads[name], rtol=1e-6)


def test_multi_node_optimizer_param_without_grad_on_gpu(comm: Any) -> None:
    """A parameter without a gradient contributes zeros, made on the parameters' device."""
    used, unused = nn.Linear(2, 2).to_device("cuda:0"), nn.Linear(2, 2).to_device("cuda:0")
    params = list(used.params()) + list(unused.params())
    opt = create_multi_node_optimizer(optim.SGD(params, lr=0.1), comm)
    used(dualflow.tensor(np.ones((1, 2), np.float32), device="cuda:0")).sum().backward()
    opt.step()
    for p in unused.params():
        assert p.grad is not None and p.grad.device == p.device
        assert not p.grad.numpy().any()

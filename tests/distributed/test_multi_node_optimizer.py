"""The multi-node optimizer (gradient averaging, fp16 transfer, zero-filling, buckets) and
``scatter_dataset``, on loopback ranks.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow import optim
from dualflow.data import TensorDataset
from dualflow.distributed import (
    create_communicator,
    create_multi_node_optimizer,
    run_loopback,
    scatter_dataset,
)
from dualflow.distributed.multi_node_optimizer import plan_buckets
from dualflow.errors import CommunicatorError
from dualflow.nn import Parameter
from tests.distributed.helpers import (
    NAMES,
    batches,
    data_parallel,
    make_params,
    make_step,
    single_process,
)

PER_RANK = 4


@pytest.mark.parametrize("size", [2, 3])
def test_ranks_agree_and_match_one_process_on_the_whole_batch(size: int) -> None:
    data = batches(4, PER_RANK, size, np.float64)
    ranks = run_loopback(lambda comm: data_parallel(comm, data, PER_RANK)[0], size)
    for params in ranks[1:]:
        for got, want in zip(params, ranks[0]):
            np.testing.assert_array_equal(got, want)  # bit-identical across ranks
    for got, want in zip(ranks[0], single_process(data)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_float32_small_buckets_match_one_process() -> None:
    data = batches(3, PER_RANK, 2)
    ranks = run_loopback(lambda c: data_parallel(c, data, PER_RANK, bucket_mb=1e-4)[0], 2)
    for got, want in zip(ranks[0], single_process(data)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_float16_transfer_is_close_and_keeps_the_dtype() -> None:
    data = batches(3, PER_RANK, 2)
    ranks = run_loopback(lambda c: data_parallel(c, data, PER_RANK, grad_dtype="float16")[0], 2)
    for a, b in zip(*ranks):
        np.testing.assert_array_equal(a, b)
    for got, want in zip(ranks[0], single_process(data)):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


def test_parameters_without_a_gradient_are_zero_filled() -> None:
    def body(comm):
        p, q = Parameter(np.ones(3, np.float32)), Parameter(np.ones(2, np.float32))
        opt = create_multi_node_optimizer(optim.SGD([p, q], lr=1.0), comm)
        if comm.rank == 0:  # only rank 0 has a gradient for q; nobody has one for p... almost
            q.grad = dualflow.tensor([4.0, 2.0])
        else:
            p.grad = dualflow.tensor([2.0, 2.0, 2.0])
        opt.step()
        return p.numpy(), q.numpy(), p.grad.numpy()

    for p, q, pg in run_loopback(body, 2):
        np.testing.assert_array_equal(pg, [1.0, 1.0, 1.0])  # (0 + 2) / 2
        np.testing.assert_array_equal(p, [0.0, 0.0, 0.0])
        np.testing.assert_array_equal(q, [-1.0, 0.0])  # 1 - (4 + 0) / 2, 1 - (2 + 0) / 2


def test_bucket_plan_is_deterministic_and_capped() -> None:
    specs = [((s,), "float32") for s in (10, 30, 5, 100, 1, 1)]
    plan = plan_buckets(specs, bucket_bytes=160)
    assert [b.positions for b in plan] == [(0, 1), (2,), (3,), (4, 5)]
    assert [b.nbytes for b in plan] == [160, 20, 400, 8]  # 100 floats exceed the cap: alone
    assert plan == plan_buckets(specs, bucket_bytes=160)
    half = plan_buckets(specs, bucket_bytes=160, grad_dtype="float16")
    assert [b.nbytes for b in half] == [90, 200, 4] and half[0].dtype == "float16"
    mixed = plan_buckets([((2,), "float32"), ((2,), "float64")], bucket_bytes=10**6)
    assert [b.dtype for b in mixed] == ["float32", "float64"]


def test_the_optimizer_plans_by_bucket_mb() -> None:
    def count(mb: float) -> int:
        opt = create_multi_node_optimizer(
            optim.SGD(make_params(), lr=0.1),
            dualflow.distributed.create_communicator("loopback"),
            bucket_mb=mb,
        )
        return len(opt.buckets)

    # 128 + 32 + 96 + 12 bytes of float32 gradients.
    assert count(25) == 1 and count(128 / 2**20) == 3 and count(12 / 2**20) == 4


def test_wrapper_exposes_the_wrapped_optimizer() -> None:
    inner = optim.SGD(make_params(), lr=0.1, momentum=0.9)
    opt = create_multi_node_optimizer(inner, dualflow.distributed.create_communicator("loopback"))
    assert opt.param_groups is inner.param_groups and opt.state is inner.state
    assert opt.state_dict()["param_groups"][0]["momentum"] == 0.9
    with pytest.raises(ValueError, match="grad_dtype"):
        create_multi_node_optimizer(inner, opt.comm, grad_dtype="int8")


def test_ranks_with_different_models_fail_clearly() -> None:
    def body(comm):
        params = make_params()[: 4 - comm.rank]
        opt = create_multi_node_optimizer(optim.SGD(params, lr=0.1), comm)
        opt.step()

    with pytest.raises(CommunicatorError, match="rank 1's parameters differ from rank 0's"):
        run_loopback(body, 2)


def _reversed_on_rank_1(comm) -> dict:
    return {"order": [3, 2, 1, 0] if comm.rank == 1 else None}


@pytest.mark.parametrize("compile", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("bucket_mb", [25, 100 / 2**20])
def test_packing_in_model_order_ignores_param_group_order(compile: bool, bucket_mb: float) -> None:
    data = batches(3, PER_RANK, 2, np.float64)

    def body(comm):
        order = [3, 2, 1, 0] if comm.rank == 1 else None
        params = make_params(np.float64)
        listed = [params[i] for i in (order or range(4))]
        opt = create_multi_node_optimizer(
            optim.SGD(listed, lr=0.5), comm, bucket_mb, named_params=zip(NAMES, params)
        )
        step = make_step(params, opt)
        fn = dualflow.compile(step, fallback="error") if compile else step
        lo = comm.rank * PER_RANK
        for x, t in data:
            fn(dualflow.tensor(x[lo : lo + PER_RANK]), dualflow.tensor(t[lo : lo + PER_RANK]))
        return [n for n, _ in opt.named_params()], [p.numpy() for p in params]

    (names0, ranks0), (names1, ranks1) = run_loopback(body, 2)
    assert names0 == names1 == NAMES[::-1]  # reverse model order
    for a, b, want in zip(ranks0, ranks1, single_process(data)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, want, rtol=1e-12, atol=1e-14)


def test_a_model_names_its_parameters() -> None:
    model = dualflow.nn.Sequential(dualflow.nn.Linear(3, 2), dualflow.nn.Linear(2, 1))
    sgd = optim.SGD(list(model.params())[::-1], lr=0.1)
    comm = dualflow.distributed.create_communicator("loopback")
    opt = create_multi_node_optimizer(sgd, comm, model=model)
    assert [n for n, _ in opt.named_params()] == ["1.bias", "1.weight", "0.bias", "0.weight"]
    with pytest.raises(ValueError, match="not both"):
        create_multi_node_optimizer(sgd, comm, model=model, named_params={})
    stranger = optim.SGD([Parameter(np.ones((4, 4), np.float32))], lr=0.1)
    with pytest.raises(ValueError, match=r"parameter #0 of param group 0 \(shape \(4, 4\)\)"):
        create_multi_node_optimizer(stranger, comm, model=model).step()


def test_without_names_a_different_order_fails_clearly() -> None:
    data = batches(1, PER_RANK, 2)
    with pytest.raises(
        CommunicatorError,
        match=r"parameter #0: rank 0 has 'param_groups\[0\]\[3\]' \(3,\) float32, rank 1 "
        r"has 'param_groups\[0\]\[3\]' \(8, 4\) float32",
    ):
        run_loopback(lambda c: data_parallel(c, data, PER_RANK, **_reversed_on_rank_1(c)), 2)


def test_a_parameter_set_change_on_one_rank_is_caught_by_name() -> None:
    def body(comm):
        params = make_params()
        named = dict(zip(NAMES, params))
        opt = create_multi_node_optimizer(optim.SGD(params[:3], lr=0.1), comm, named_params=named)
        for i in range(3):  # a gradient appears and disappears: zero-filled, same layout
            opt.zero_grad()
            params[i].grad = dualflow.tensor(np.ones(params[i].shape, np.float32))
            opt.step()
        plan = opt.buckets
        if comm.rank == 1:  # now only rank 1's parameter set changes: every rank must notice
            opt.add_param_group({"params": [params[3]]})
        opt.step()
        return plan

    with pytest.raises(
        CommunicatorError,
        match=r"rank 1's parameters differ from rank 0's at parameter #0: rank 0 has "
        r"'fc2.weight' \(3, 8\) float32, rank 1 has 'fc2.bias' \(3,\) float32 \(3 vs 4",
    ):
        run_loopback(body, 2)


@pytest.mark.parametrize("shuffle", [True, False])
def test_scatter_dataset_gives_disjoint_equal_deterministic_shards(shuffle: bool) -> None:
    dataset = TensorDataset(np.arange(11))

    def body(comm):
        shard = scatter_dataset(dataset, comm, shuffle=shuffle, seed=3)
        return [int(shard[i][0]) for i in range(len(shard))]

    shards = run_loopback(body, 3)
    assert [len(s) for s in shards] == [3, 3, 3]
    assert len({i for shard in shards for i in shard}) == 9  # disjoint; 11 % 3 = 2 items left out
    assert run_loopback(body, 3) == shards
    if not shuffle:
        assert shards == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_scatter_dataset_checks_lengths() -> None:
    def body(comm):
        scatter_dataset(TensorDataset(np.arange(4 + comm.rank)), comm)

    with pytest.raises(CommunicatorError, match="different lengths"):
        run_loopback(body, 2)


@pytest.mark.parametrize("bucket_mb", [0, -1.0, float("nan"), float("inf"), "25"])
def test_a_bad_bucket_size_is_refused_at_construction(bucket_mb: object) -> None:
    sgd = optim.SGD([Parameter(np.ones(2, np.float32))], lr=0.1)
    with pytest.raises(ValueError, match=r"create_multi_node_optimizer: bucket_mb must be a"):
        create_multi_node_optimizer(sgd, create_communicator("loopback"), bucket_mb=bucket_mb)

"""Data-parallel training of an MLP on the 8×8 digits: ``mpiexec -n 2 python <this> --smoke``.

Each rank trains on its shard (``scatter_dataset``) with gradients averaged over the ranks
(``create_multi_node_optimizer``); rank 0 prints the test accuracy. At the end the script checks,
through an allgather of a checksum, that every rank holds the same parameters.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import dualflow
from dualflow import nn, ops, optim
from dualflow.data import DataLoader, TensorDataset, load_digits
from dualflow.distributed import create_communicator, create_multi_node_optimizer, scatter_dataset


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--communicator", default="mpi", choices=["mpi", "nccl", "loopback"])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--grad-dtype", default=None, help="e.g. float16 to halve the traffic")
    parser.add_argument("--compile", action="store_true", help="compile the training step")
    parser.add_argument("--smoke", action="store_true", help="3 epochs (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs = min(args.epochs, 3)
    return args


def accuracy(model: nn.Module, loader: DataLoader) -> float:
    correct = total = 0
    with dualflow.no_grad():
        for x, t in loader:
            correct += int((ops.argmax(model(x), axis=1).numpy() == t.numpy()).sum())
            total += len(t)
    return correct / total


def main(argv: list[str] | None = None) -> float:
    args = parse_args(argv)
    comm = create_communicator(args.communicator)
    dualflow.random.seed(comm.rank)  # different on purpose: bcast_params makes them equal
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    comm.bcast_params(model)
    shard = scatter_dataset(TensorDataset(*load_digits("train")), comm, seed=0)
    train = DataLoader(shard, batch_size=args.batch_size, shuffle=True, seed=comm.rank)
    opt = optim.SGD(list(model.params()), lr=args.lr, momentum=0.9)
    opt = create_multi_node_optimizer(opt, comm, grad_dtype=args.grad_dtype)

    def step(x: dualflow.Tensor, t: dualflow.Tensor) -> dualflow.Tensor:
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss.detach()

    train_step = dualflow.compile(step) if args.compile else step
    if comm.rank == 0:
        mode = "compiled" if args.compile else "eager"
        print(f"digits MLP, {comm.size} ranks ({comm.name}, {mode}): {len(shard)} images/rank")
    for epoch in range(args.epochs):
        start, losses = time.perf_counter(), []
        for x, t in train:
            losses.append(train_step(x, t).item())
        mean_loss = comm.allreduce(np.array(np.mean(losses)), op="mean").item()
        if comm.rank == 0:
            print(
                f"epoch {epoch + 1}: loss {mean_loss:.4f} time {time.perf_counter() - start:.3f}s"
            )
    checksums = comm.allgather(float(sum(np.abs(p.numpy()).sum() for p in model.params())))
    assert len(set(checksums)) == 1, f"ranks disagree on the parameters: {checksums}"
    result = accuracy(model, DataLoader(TensorDataset(*load_digits("test")), batch_size=256))
    if comm.rank == 0:
        print(f"parameters identical on all {comm.size} ranks (checksum {checksums[0]:.6f})")
        print(f"test accuracy: {result:.4f}")
    return result


if __name__ == "__main__":
    main()

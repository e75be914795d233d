"""Data-parallel training of the digits CNN: ``mpiexec -n 2 python <this> --smoke [--compile]``.

Each rank trains on its shard (``scatter_dataset``) with gradients averaged over the ranks during
backward (``create_multi_node_optimizer``). Every rank's throughput is printed,
then, after a checksum allgather shows that all ranks hold the same parameters, rank 0's test
accuracy.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import dualflow
from dualflow import nn, ops, optim
from dualflow.data import DataLoader, TensorDataset, load_digits
from dualflow.distributed import create_communicator, create_multi_node_optimizer, scatter_dataset
from dualflow.vision.models.digits_cnn import digits_cnn


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--communicator", default="mpi", choices=["mpi", "nccl", "loopback"])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--grad-dtype", default=None, help="e.g. float16 to halve the traffic")
    parser.add_argument("--compile", action="store_true", help="compile the training step")
    parser.add_argument("--smoke", action="store_true", help="3 epochs (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs = min(args.epochs, 3)
    return args


def build_model() -> nn.Module:
    """The digits CNN: two conv blocks (8×8 -> 4×4 -> 2×2) and a linear classifier."""
    return digits_cnn()


def accuracy(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    correct = total = 0
    with dualflow.no_grad():
        for x, t in loader:
            correct += int((ops.argmax(model(x), axis=1).numpy() == t.numpy()).sum())
            total += len(t)
    return correct / total


def average_buffers(model: nn.Module, comm) -> None:
    """Average the BatchNorm running statistics, which each rank collected on its own shard."""
    with dualflow.no_grad():
        for _, buffer in model.named_buffers():
            if np.dtype(buffer.dtype).kind == "f":  # the batch counter stays an integer
                mean = comm.allreduce(np.ascontiguousarray(buffer.numpy()), op="mean")
                ops.assign(buffer, dualflow.tensor(mean))


def train(args: argparse.Namespace, comm, model: nn.Module, shard) -> float:
    """Train ``args.epochs`` epochs; returns this rank's images/s (after the first epoch)."""
    loader = DataLoader(shard, batch_size=args.batch_size, shuffle=True, seed=comm.rank)
    opt = optim.SGD(list(model.params()), lr=args.lr, momentum=0.9)
    opt = create_multi_node_optimizer(opt, comm, grad_dtype=args.grad_dtype, model=model)

    def step(x: dualflow.Tensor, t: dualflow.Tensor) -> dualflow.Tensor:
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss.detach()

    train_step = dualflow.compile(step) if args.compile else step
    timed_images, timed_seconds = 0, 0.0
    for epoch in range(args.epochs):
        model.train()
        start, losses, images = time.perf_counter(), [], 0
        for x, t in loader:
            losses.append(train_step(x, t).item())
            images += len(t)
        seconds = time.perf_counter() - start
        if epoch > 0 or args.epochs == 1:  # the first epoch pays for warm-up and compiling
            timed_images, timed_seconds = timed_images + images, timed_seconds + seconds
        mean_loss = comm.allreduce(np.array(np.mean(losses)), op="mean").item()
        if comm.rank == 0:
            print(f"epoch {epoch + 1}: loss {mean_loss:.4f} time {seconds:.3f}s", flush=True)
    return timed_images / timed_seconds


def main(argv: list[str] | None = None) -> float:
    args = parse_args(argv)
    comm = create_communicator(args.communicator)
    dualflow.random.seed(comm.rank)  # different on purpose: bcast_params makes them equal
    model = build_model()
    comm.bcast_params(model)
    shard = scatter_dataset(TensorDataset(*load_digits("train")), comm, seed=0)
    if comm.rank == 0:
        mode = "compiled" if args.compile else "eager"
        print(f"digits CNN, {comm.size} ranks ({comm.name}, {mode}): {len(shard)} images/rank")
    throughput = comm.gather(train(args, comm, model, shard))
    checksums = comm.allgather(float(sum(np.abs(p.numpy()).sum() for p in model.params())))
    assert len(set(checksums)) == 1, f"ranks disagree on the parameters: {checksums}"
    average_buffers(model, comm)
    result = accuracy(model, DataLoader(TensorDataset(*load_digits("test")), batch_size=256))
    if comm.rank == 0:
        for rank, rate in enumerate(throughput):
            print(f"rank {rank}: {rate:.0f} images/s")
        print(f"total: {sum(throughput):.0f} images/s")
        print(f"parameters identical on all {comm.size} ranks (checksum {checksums[0]:.6f})")
        print(f"test accuracy: {result:.4f}")
    return result


if __name__ == "__main__":
    main()

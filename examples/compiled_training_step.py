"""The canonical compiled training step: ``@dualflow.compile`` over forward, backward and update.

Trains an MLP on the embedded 8×8 digits with one compiled function doing the whole step
(``zero_grad``, forward, loss, ``backward()``, ``optimizer.step()``), prints per-epoch metrics,
a ``dualflow.explain(step)`` summary (why each trace was made, what every pass did, the memory
plan), eager vs compiled milliseconds per step measured in this same run from identical starts
(with the largest loss difference between the two), and the final test accuracy.

Run: ``python examples/compiled_training_step.py`` (``--explain-full`` prints the whole report
with the graph; ``--smoke`` is the few-second CI run).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator

import dualflow
from dualflow import nn, ops, optim
from dualflow.data import DataLoader, TensorDataset, load_digits
from dualflow.training import accuracy, evaluate

Step = Callable[[dualflow.Tensor, dualflow.Tensor], tuple[dualflow.Tensor, dualflow.Tensor]]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timing-steps", type=int, default=200, help="steps per mode timed")
    parser.add_argument("--explain-full", action="store_true", help="print the whole explain()")
    parser.add_argument("--smoke", action="store_true", help="2 epochs on 320 images (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs, args.timing_steps = min(args.epochs, 2), min(args.timing_steps, 20)
    return args


def build(hidden: int, lr: float, seed: int) -> tuple[nn.Module, optim.Optimizer]:
    """A fresh model and optimizer; the same seed gives the same initial parameters."""
    dualflow.random.seed(seed)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))
    return model, optim.SGD(list(model.params()), lr=lr, momentum=0.9)


def make_train_step(model: nn.Module, optimizer: optim.Optimizer) -> Step:
    """The whole update as one function, so the compiled graph holds all of it."""

    @dualflow.compile
    def train_step(
        x: dualflow.Tensor, y: dualflow.Tensor
    ) -> tuple[dualflow.Tensor, dualflow.Tensor]:
        optimizer.zero_grad()
        logits = model(x)
        loss = ops.softmax_cross_entropy(logits, y)
        loss.backward()  # traced too: the backward ops land in the same graph
        optimizer.step()  # parameter and momentum writes become the graph's state updates
        return loss, logits

    return train_step


def train(step: Step, loader: DataLoader, epochs: int) -> None:
    for epoch in range(epochs):
        start, losses, accuracies = time.perf_counter(), [], []
        for x, y in loader:
            loss, logits = step(x, y)
            losses.append(loss.item())
            accuracies.append(accuracy(logits, y))
        seconds = time.perf_counter() - start
        print(
            f"epoch {epoch + 1}: loss {statistics.fmean(losses):.4f} "
            f"acc {statistics.fmean(accuracies):.4f} time {seconds:.3f}s"
        )


def summarize(step: Step, full: bool) -> None:
    """What the step compiled to: one line per trace, per pass, and the memory plan."""
    explanation = dualflow.explain(step)
    if full:
        print(explanation)
        return
    print(str(explanation).splitlines()[0])  # calls, traces, plan runs, compile time
    # The optimizer creates its momentum buffers in its first step(), so the first trace is
    # used once and the second, with the buffers captured as state, is the one kept.
    print(f"  why each trace was made: {explanation.stats.retrace_reasons}")
    for i, trace in enumerate(explanation.traces):
        g = trace.graph
        print(
            f"  kept trace {i}: {len(g.nodes)} nodes, {len(g.inputs)} inputs, "
            f"{len(g.state)} captured state tensors, {len(g.updates)} state updates"
        )
        for st in trace.pass_stats:
            print(
                f"    pass {st.name:<16} {st.nodes_before:>3} -> {st.nodes_after:>3} nodes "
                f"({st.seconds * 1e3:.2f} ms)"
            )
        table = trace.plan.memory_table().splitlines()
        print(f"    memory plan ({len(table) - 2} planned values), first rows and total:")
        for line in [*table[:4], table[-1]]:
            print(f"      {line}")


def time_modes(args: argparse.Namespace, batches: list) -> None:
    """Eager and compiled steps from identical starts on identical batches, in this process."""
    results = {}
    for mode in ("eager", "compiled"):
        model, optimizer = build(args.hidden, args.lr, args.seed)
        step = make_train_step(model, optimizer)
        if mode == "eager":
            step = step.__wrapped__  # the undecorated Python function
        losses, times = [], []
        for x, y in batches:
            start = time.perf_counter()
            loss, _ = step(x, y)
            losses.append(loss.item())  # included in the timing: it syncs, as a user's would
            times.append(time.perf_counter() - start)
        # the first 2 compiled calls trace (see summarize); skip them in both modes
        results[mode] = (losses, statistics.median(times[2:]) * 1e3)
    (eager_losses, eager_ms), (graph_losses, graph_ms) = results["eager"], results["compiled"]
    diff = max(abs(a - b) for a, b in zip(eager_losses, graph_losses))
    print(f"ms/step over {len(batches)} steps (median, traces excluded):")
    print(f"  eager {eager_ms:.3f} ms, compiled {graph_ms:.3f} ms ({eager_ms / graph_ms:.2f}x)")
    print(f"  max |eager - compiled| loss over those steps: {diff:.2e}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    x_train, y_train = load_digits("train")
    if args.smoke:
        x_train, y_train = x_train[:320], y_train[:320]
    # drop_last: every batch has the same shape, so one trace serves the whole run (a smaller
    # last batch would be a new signature and make a second trace).
    train_loader = DataLoader(
        TensorDataset(x_train, y_train),
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        seed=args.seed,
    )
    print(f"digits MLP, compiled step: {len(x_train)} train images, {args.epochs} epochs")
    model, optimizer = build(args.hidden, args.lr, args.seed)
    step = make_train_step(model, optimizer)
    train(step, train_loader, args.epochs)
    summarize(step, args.explain_full)
    batches = [batch for _, batch in zip(range(args.timing_steps), _forever(train_loader))]
    time_modes(args, batches)
    test_loader = DataLoader(TensorDataset(*load_digits("test")), batch_size=359)
    test = evaluate(model, test_loader, ops.softmax_cross_entropy)  # eval mode, no_grad
    print(f"test accuracy: {test.accuracy:.4f}")
    return 0


def _forever(loader: DataLoader) -> Iterator[tuple[dualflow.Tensor, dualflow.Tensor]]:
    """Batches across epochs, for as many as the caller takes."""
    while True:
        yield from loader


if __name__ == "__main__":
    raise SystemExit(main())

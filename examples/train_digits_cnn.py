"""Train a small CNN (Conv2d, BatchNorm2d, ReLU, MaxPool2d, Dropout, Linear) on the 8×8 digits.

Uses ``dualflow.training.fit`` and prints per-epoch loss, accuracy, test accuracy and time, then
the final test accuracy. ``--compile`` runs the training step as a compiled graph; ``--smoke``
is a few-second run on a subset (for CI).
"""

from __future__ import annotations

import argparse
import statistics

import dualflow
from dualflow import nn, ops, optim
from dualflow.data import DataLoader, TensorDataset, load_digits
from dualflow.training import fit
from dualflow.vision.models.digits_cnn import digits_cnn


def build_model(dropout: float = 0.25) -> nn.Module:
    """Two conv blocks (8×8 -> 4×4 -> 2×2) and a linear classifier over 10 digits."""
    return digits_cnn(dropout)


class PrintEpoch:
    """A fit callback printing one line per epoch (and keeping the trainer for the summary)."""

    trainer = None

    def on_epoch_end(self, info: dict) -> None:
        self.trainer = info["trainer"]
        print(
            f"epoch {info['epoch'] + 1}: loss {info['loss']:.4f} acc {info['accuracy']:.4f} "
            f"test_loss {info['val_loss']:.4f} test_acc {info['val_accuracy']:.4f} "
            f"time {info['seconds']:.3f}s",
            flush=True,
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true", help="compile the training step")
    parser.add_argument("--smoke", action="store_true", help="at most 2 epochs on 320 images (CI)")
    parser.add_argument("--log-path", default=None, help="write JSON-lines metrics here")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs = min(args.epochs, 2)
    return args


def main(argv: list[str] | None = None) -> float:
    args = parse_args(argv)
    dualflow.random.seed(args.seed)  # parameter init and dropout masks
    x_train, y_train = load_digits("train")
    if args.smoke:
        x_train, y_train = x_train[:320], y_train[:320]
    train = DataLoader(
        TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True, seed=args.seed
    )
    test = DataLoader(TensorDataset(*load_digits("test")), batch_size=256)
    model = build_model()
    optimizer = optim.Adam(list(model.params()), lr=args.lr)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    mode = "compiled" if args.compile else "eager"
    print(f"digits CNN ({mode}): {len(x_train)} train / 359 test images, {args.epochs} epochs")
    history = fit(
        model,
        optimizer,
        ops.softmax_cross_entropy,
        train,
        epochs=args.epochs,
        val_loader=test,
        scheduler=scheduler,
        callbacks=[printer := PrintEpoch()],
        log_path=args.log_path,
        progress=not (args.no_progress or args.smoke),
        compile=args.compile,
    )
    report(history)
    if args.compile:  # the step fit compiled: how often it ran as a graph
        stats = printer.trainer.step_fn.stats()
        print(f"compiled step: {stats.traces} traces, {stats.plan_runs} graph runs")
    return history[-1]["val_accuracy"]


def report(history: list[dict]) -> None:
    """The summary lines: loss trend, test accuracy and epoch times (first epoch compiles)."""
    first, last = history[0]["loss"], history[-1]["loss"]
    print(f"train loss {first:.4f} -> {last:.4f} ({'decreased' if last < first else 'increased'})")
    print(f"test accuracy: {history[-1]['val_accuracy']:.4f}")
    times = [record["seconds"] for record in history]
    later = statistics.median(times[1:]) if len(times) > 1 else times[0]
    print(f"epoch time: first {times[0]:.3f}s, median of the rest {later:.3f}s")


if __name__ == "__main__":
    main()

"""Train a two-layer MLP on the embedded 8×8 digits with ``dualflow.training.fit``.

Prints per-epoch metrics, the final test accuracy and epoch times. ``--compile`` runs the training
step as a compiled graph; ``--smoke`` is a few-second run on a subset (for CI);
``--checkpoint PATH`` saves every epoch and ``--resume PATH`` continues such a run.
"""

from __future__ import annotations

import argparse
import statistics

import dualflow
from dualflow import nn, ops, optim
from dualflow.data import DataLoader, TensorDataset, load_digits
from dualflow.training import fit


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true", help="compile the training step")
    parser.add_argument("--smoke", action="store_true", help="at most 3 epochs on 320 images (CI)")
    parser.add_argument("--log-path", default=None, help="write JSON-lines metrics here")
    parser.add_argument("--checkpoint", default=None, help="checkpoint here after every epoch")
    parser.add_argument("--resume", default=None, help="continue from this checkpoint")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs = min(args.epochs, 3)
    return args


def main(argv: list[str] | None = None) -> float:
    args = parse_args(argv)
    dualflow.random.seed(args.seed)
    x_train, y_train = load_digits("train")
    if args.smoke:
        x_train, y_train = x_train[:320], y_train[:320]
    train = DataLoader(
        TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True, seed=args.seed
    )
    test = DataLoader(TensorDataset(*load_digits("test")), batch_size=256)
    model = nn.Sequential(
        nn.Flatten(), nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10)
    )
    optimizer = optim.SGD(list(model.params()), lr=args.lr, momentum=0.9)
    mode = "compiled" if args.compile else "eager"
    print(f"digits MLP ({mode}): {len(x_train)} train / 359 test images, {args.epochs} epochs")
    history = fit(
        model,
        optimizer,
        ops.softmax_cross_entropy,
        train,
        epochs=args.epochs,
        val_loader=test,
        log_path=args.log_path,
        checkpoint_path=args.checkpoint,
        resume=args.resume,
        progress=not (args.no_progress or args.smoke),
        compile=args.compile,
    )
    for r in history:
        print(
            f"epoch {r['epoch'] + 1}: loss {r['loss']:.4f} acc {r['accuracy']:.4f} "
            f"test_acc {r['val_accuracy']:.4f} time {r['seconds']:.3f}s"
        )
    first, last = history[0]["loss"], history[-1]["loss"]
    print(f"train loss {first:.4f} -> {last:.4f} ({'decreased' if last < first else 'increased'})")
    print(f"test accuracy: {history[-1]['val_accuracy']:.4f}")
    times = [r["seconds"] for r in history]
    print(f"epoch time: median {statistics.median(times):.4f}s")
    return history[-1]["val_accuracy"]


if __name__ == "__main__":
    main()

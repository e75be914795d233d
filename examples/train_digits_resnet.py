"""Train a CIFAR-style ResNet-18 (narrow by default) on the 8×8 digits upsampled to 32×32.

Images go through ``dualflow.vision.transforms`` (bilinear resize, 3 channels, normalize);
prints per-epoch loss and test accuracy, training images/s, then top-1/top-5 accuracy.
``--compile`` runs the training step as a compiled graph; ``--smoke`` is a few-second run (CI).
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

import dualflow
from dualflow import ops, optim
from dualflow.data import DataLoader, TensorDataset, load_digits
from dualflow.training import fit
from dualflow.vision import evaluate, transforms
from dualflow.vision.models import resnet18


def prepare(split: str, limit: int | None = None) -> TensorDataset:
    """Digits as (N, 3, 32, 32) float32, normalized with the training set's mean and std."""
    images, labels = load_digits(split)
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    big = transforms.resize(images, (32, 32), axes=(2, 3))  # the whole batch in one call
    rgb = np.repeat(big, 3, axis=1)  # the ResNet stem expects 3 channels
    mean, std = 0.31, 0.32  # of the upsampled training digits, rounded: fixed for both splits
    return TensorDataset(transforms.normalize(rgb, [mean] * 3, [std] * 3, channel_axis=1), labels)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--width", type=float, default=0.125, help="stage width multiplier")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true", help="compile the training step")
    parser.add_argument("--smoke", action="store_true", help="2 short epochs on 64 images (CI)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs, args.width = min(args.epochs, 2), min(args.width, 0.125)
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    dualflow.random.seed(args.seed)
    train_set = prepare("train", 64 if args.smoke else None)
    test_set = prepare("test", 64 if args.smoke else None)
    train = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, seed=args.seed)
    test = DataLoader(test_set, batch_size=128)
    model = resnet18(num_classes=10, cifar_stem=True, width=args.width)
    optimizer = optim.Adam(list(model.params()), lr=args.lr)
    mode = "compiled" if args.compile else "eager"
    print(
        f"digits ResNet-18 ({mode}, width {args.width}): {len(train_set)} train / "
        f"{len(test_set)} test images at 32×32, {args.epochs} epochs",
        flush=True,
    )
    history = fit(
        model,
        optimizer,
        ops.softmax_cross_entropy,
        train,
        epochs=args.epochs,
        val_loader=test,
        progress=not (args.no_progress or args.smoke),
        compile=args.compile,
    )
    for record in history:
        print(
            f"epoch {record['epoch'] + 1}: loss {record['loss']:.4f} "
            f"test_acc {record['val_accuracy']:.4f} time {record['seconds']:.2f}s"
        )
    # The first epoch includes tracing/compiling; later epochs show the steady rate.
    times = [record["seconds"] for record in history]
    steady = statistics.median(times[1:]) if len(times) > 1 else times[0]
    print(f"training throughput: {len(train_set) / steady:.1f} images/s")
    result = evaluate(model, test, ks=(1, 5), progress=not (args.no_progress or args.smoke))
    print(f"test top-1 accuracy: {result['top1']:.4f}, top-5: {result['top5']:.4f}")
    return result


if __name__ == "__main__":
    main()

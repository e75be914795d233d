"""Debug a model the define-by-run way: plain prints, ``breakpoint()``, then debug mode.

Eager mode runs your Python line by line, so the usual tools work: this example trains a small
MLP on the embedded 8×8 digits for a few eager steps and prints intermediate tensors (shapes,
values, ``.grad``), shows where a ``breakpoint()`` goes (``--pdb`` actually stops there), shows a
shape bug raised eagerly as ``ShapeError`` at the offending line of this file, and finally turns
on debug mode (``dualflow.set_debug(True)``, or ``DUALFLOW_DEBUG=1``) so a NaN produced inside a
*compiled* training step raises ``NumericalError`` naming the line of this file that caused it.

Run: ``python examples/eager_debugging.py`` (add ``--pdb`` to stop in the debugger, ``--smoke``
for the short CI run).
"""

from __future__ import annotations

import argparse

import numpy as np

import dualflow
from dualflow import nn, ops, optim
from dualflow.data import DataLoader, TensorDataset, load_digits
from dualflow.errors import NumericalError, ShapeError

ENTROPY_BONUS = 0.01  # rewards less confident predictions (a common regularizer)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="eager training steps")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pdb", action="store_true", help="stop in pdb inside the first step")
    parser.add_argument("--smoke", action="store_true", help="5 steps (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps = min(args.steps, 5)
    return args


def build_model(hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def describe(name: str, t: dualflow.Tensor) -> str:
    """One line about a tensor: shape, dtype and value range (values are plain numpy)."""
    a = t.numpy()
    return (
        f"  {name:<14} shape {t.shape!s:<10} {t.dtype}  "
        f"min {a.min():+.4f} mean {a.mean():+.4f} max {a.max():+.4f}"
    )


def inspect_step(model: nn.Sequential, x: dualflow.Tensor, y: dualflow.Tensor, pdb: bool) -> None:
    """Run the layers one at a time, print what flows through them, then the gradients."""
    flatten, first, relu, second = model  # a Sequential iterates over its layers
    flat = flatten(x)
    hidden = relu(first(flat))
    logits = second(hidden)
    loss = ops.softmax_cross_entropy(logits, y)
    print("forward, layer by layer:")
    for name, t in [
        ("images", x),
        ("flattened", flat),
        ("hidden (ReLU)", hidden),
        ("logits", logits),
    ]:
        print(describe(name, t))
    print(f"  dead ReLU units in this batch: {(hidden.numpy() == 0).all(axis=0).sum()}")
    print(f"  loss {loss.item():.4f}, first row of logits {np.round(logits.numpy()[0], 3)}")
    # Gradients of intermediates are not stored in .grad (only leaves get one); ask for them
    # with dualflow.grad, keeping the graph so loss.backward() can still run afterwards.
    (g_hidden,) = dualflow.grad(loss, hidden, retain_graph=True)
    print(describe("d loss/d hidden", g_hidden))
    loss.backward()  # fills .grad of every parameter (the leaves)
    print("parameter gradients after loss.backward():")
    for name, p in model.named_params():
        print(f"  {name:<10} .grad shape {p.grad.shape}, norm {np.linalg.norm(p.grad.numpy()):.4f}")
    if pdb:
        # Everything above is a live Python object here: try `p hidden.shape`,
        # `p logits.numpy()[:2]`, `p first.weight.grad`, `pp dict(model.named_params())`.
        breakpoint()
    model.zero_grad()


def train_eagerly(model: nn.Module, loader: DataLoader, steps: int, lr: float) -> list[float]:
    """Plain eager steps; every line can be stepped through in a debugger."""
    optimizer = optim.SGD(list(model.params()), lr=lr)
    losses: list[float] = []
    while len(losses) < steps:
        for x, y in loader:
            optimizer.zero_grad()
            loss = ops.softmax_cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())  # .item() is an ordinary float: print it, compare it
            if len(losses) == steps:
                break
    return losses


def shape_bug(model: nn.Sequential, x: dualflow.Tensor) -> None:
    """Calling the first Linear on unflattened images fails at once, at this file's line."""
    try:
        model[1](x)  # shape bug: forgot to flatten the images
    except ShapeError as error:
        print(f"ShapeError: {error}")


def entropy_regularized_loss(
    model: nn.Module, x: dualflow.Tensor, y: dualflow.Tensor
) -> dualflow.Tensor:
    """Cross-entropy minus an entropy bonus; a saturated softmax makes p == 0 and log(p) = -inf,
    and then 0 * -inf = NaN: the classic way an entropy term poisons a loss."""
    logits = model(x)
    p = ops.softmax(logits)
    entropy = -(p * ops.log(p)).sum(axis=1).mean()  # the NaN starts here: log(0)
    return ops.softmax_cross_entropy(logits, y) - ENTROPY_BONUS * entropy


def compiled_nan(model: nn.Module, x: dualflow.Tensor, y: dualflow.Tensor, lr: float) -> None:
    """Debug mode in a compiled step: the graph checks every node and names the source line."""
    optimizer = optim.SGD(list(model.params()), lr=lr)
    huge = dualflow.tensor(x.numpy() * 1e4)  # on purpose: saturates the softmax to exact 0/1
    with dualflow.no_grad():
        print(
            f"debug off: loss on the bad batch = {entropy_regularized_loss(model, huge, y).item()}"
        )

    @dualflow.compile
    def train_step(x: dualflow.Tensor, y: dualflow.Tensor) -> dualflow.Tensor:
        optimizer.zero_grad()
        loss = entropy_regularized_loss(model, x, y)
        loss.backward()
        optimizer.step()
        return loss

    # Debug mode is part of the compile cache key: turn it on before the step is first traced.
    dualflow.set_debug(True)  # DUALFLOW_DEBUG=1 in the environment does the same at import
    try:
        for _ in range(3):  # the first call traces, the next ones run the compiled graph
            train_step(x, y)
        before = [p.numpy().copy() for p in model.params()]
        stats = train_step.stats()
        print(f"compiled step ran {stats.plan_runs} times as a graph; now the bad batch:")
        try:
            train_step(huge, y)
        except NumericalError as error:
            print(f"debug on, compiled: NumericalError: {error}")
        same = all(np.array_equal(b, p.numpy()) for b, p in zip(before, model.params()))
        print(f"parameters untouched by the failed step: {same}")
    finally:
        dualflow.set_debug(False)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    dualflow.random.seed(args.seed)
    images, labels = load_digits("train")
    loader = DataLoader(
        TensorDataset(images, labels), batch_size=args.batch_size, shuffle=True, seed=args.seed
    )
    model = build_model(args.hidden)
    x, y = next(iter(DataLoader(TensorDataset(images, labels), batch_size=args.batch_size)))
    print(f"digits MLP, eager: {len(images)} train images, batch {args.batch_size}")
    inspect_step(model, x, y, args.pdb)
    losses = train_eagerly(model, loader, args.steps, args.lr)
    print(f"{args.steps} eager steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    shape_bug(model, x)
    with np.errstate(divide="ignore", invalid="ignore"):  # numpy would warn about log(0) too
        compiled_nan(model, x, y, args.lr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

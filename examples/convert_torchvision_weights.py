"""Write a torchvision model's pretrained weights to ``.npz`` ({name: array}) for dualflow.

Needs ``torch`` and ``torchvision`` (installed by you; dualflow never imports them). The names
are torchvision's, which the zoo's models share, so the file loads with ``load_state_dict``::

    python examples/convert_torchvision_weights.py resnet18 resnet18.npz --verify
    model = dualflow.vision.models.resnet18()
    model.load_state_dict(dict(np.load("resnet18.npz")))
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import numpy as np

from dualflow.vision import models

MODELS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")
MODELS += ("vgg11", "vgg11_bn", "vgg16", "vgg16_bn", "mobilenet_v2")


def to_arrays(state_dict: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A state dict of torch tensors (or arrays) as numpy arrays under the same names; BN's
    ``num_batches_tracked`` is kept (dualflow's BatchNorm2d has it too)."""
    arrays = {}
    for name, value in state_dict.items():
        if hasattr(value, "detach"):  # a torch tensor: to host memory, no autograd history
            value = value.detach().cpu().numpy()
        arrays[name] = np.asarray(value)
    return arrays


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=MODELS, help="torchvision constructor name")
    parser.add_argument("output", help="the .npz file to write")
    parser.add_argument(
        "--weights", default="DEFAULT", help="torchvision weights enum member (default: DEFAULT)"
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="load the file into dualflow's model and compare logits on a random batch",
    )
    return parser.parse_args(argv)


def verify(name: str, arrays: dict[str, np.ndarray], torch_model: Any) -> float:
    """Load ``arrays`` into dualflow's ``name`` model; the max |logit difference| to torch's."""
    import torch  # noqa: PLC0415 - the user's install, only when asked to verify

    model = getattr(models, name)()
    model.load_state_dict(arrays)  # strict: every name and shape must match
    x = np.random.default_rng(0).normal(size=(2, 3, 224, 224)).astype(np.float32)
    with torch.no_grad():
        want = torch_model.eval()(torch.from_numpy(x)).numpy()
    got = model.eval()(x).numpy()
    return float(np.abs(got - want).max())


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torchvision  # noqa: PLC0415 - imported here so that --help works without it

    torch_model = torchvision.models.get_model(args.model, weights=args.weights)
    arrays = to_arrays(torch_model.state_dict())
    np.savez(args.output, **arrays)
    print(f"wrote {len(arrays)} arrays of {args.model} to {args.output}")
    if args.verify:
        print(
            f"max |logit difference| vs torchvision: {verify(args.model, arrays, torch_model):.3g}"
        )


if __name__ == "__main__":
    main()

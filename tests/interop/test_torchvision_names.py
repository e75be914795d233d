"""from_torchvision: torchvision's ResNet/VGG/MobileNetV2 names onto the zoo's models."""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.errors import CheckpointError
from dualflow.interop import from_torchvision
from dualflow.vision.models import mobilenet_v2, resnet18, resnet50, vgg11_bn

# torchvision's own names for ResNet-18, written out (not read from the model under test)
RESNET18 = ["conv1.weight"] + [f"bn1.{p}" for p in ("weight", "bias", "running_mean")]
RESNET18 += ["bn1.running_var", "bn1.num_batches_tracked", "fc.weight", "fc.bias"]
for _layer in range(1, 5):
    for _block in range(2):
        _at = f"layer{_layer}.{_block}"
        RESNET18 += [f"{_at}.conv1.weight", f"{_at}.conv2.weight"]
        for _bn in ("bn1", "bn2"):
            RESNET18 += [f"{_at}.{_bn}.{p}" for p in ("weight", "bias", "running_mean")]
            RESNET18 += [f"{_at}.{_bn}.running_var", f"{_at}.{_bn}.num_batches_tracked"]
    if _layer > 1:
        RESNET18 += [f"layer{_layer}.0.downsample.0.weight"]
        RESNET18 += [f"layer{_layer}.0.downsample.1.{p}" for p in ("weight", "bias")]
        RESNET18 += [f"layer{_layer}.0.downsample.1.{p}" for p in ("running_mean", "running_var")]
        RESNET18 += [f"layer{_layer}.0.downsample.1.num_batches_tracked"]


def checkpoint_like(model, prefix="", drop_counts=False) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {}
    for name, value in model.state_dict().items():
        if drop_counts and name.endswith("num_batches_tracked"):
            continue
        array = rng.normal(size=value.shape).astype(value.numpy().dtype)
        out[prefix + name] = np.abs(array) if "running_var" in name else array
    return out


def test_resnet18_names_are_torchvisions():
    assert sorted(resnet18(width=0.125).state_dict()) == sorted(RESNET18)


@pytest.mark.parametrize("prefix", ["", "module.", "_orig_mod.", "module._orig_mod."])
def test_prefixed_and_old_checkpoints_load(prefix):
    model = resnet18(num_classes=10, width=0.25)
    sd = checkpoint_like(model, prefix, drop_counts=True)
    model.load_state_dict(from_torchvision(sd, model))
    np.testing.assert_array_equal(model.fc.weight.numpy(), sd[prefix + "fc.weight"])
    assert int(model.bn1.num_batches_tracked) == 0


@pytest.mark.parametrize("make", [vgg11_bn, mobilenet_v2])
def test_other_zoo_models(make):
    model = make(num_classes=5, cifar_stem=True, width=0.125)
    sd = checkpoint_like(model, "module.")
    model.load_state_dict(from_torchvision(sd, model))
    x = dualflow.randn(1, 3, 32, 32)
    assert model.eval()(x).shape == (1, 5)


def test_wrong_architecture_or_classes_names_the_keys():
    sd = checkpoint_like(resnet18(num_classes=10, width=0.25))
    with pytest.raises(CheckpointError, match=r"missing \['layer1.0.conv3.weight'"):
        from_torchvision(sd, resnet50(width=0.25))
    with pytest.raises(CheckpointError, match=r"fc.weight: the checkpoint holds shape \(10, "):
        from_torchvision(sd, resnet18(num_classes=7, width=0.25))


def test_a_resnet18_saved_by_torch(tmp_path):
    torch = pytest.importorskip("torch", reason="writing a real .pth needs torch (optional)")
    model = resnet18()
    state = {name: torch.from_numpy(array.copy()) for name, array in checkpoint_like(model).items()}
    torch.save({f"module.{k}": v for k, v in state.items()}, tmp_path / "resnet18.pth")
    loaded = dualflow.load_torch(tmp_path / "resnet18.pth")
    model.load_state_dict(from_torchvision(loaded, model))
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), state[name].numpy(), err_msg=name)

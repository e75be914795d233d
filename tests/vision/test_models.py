"""The model zoo: torchvision's parameter names and counts, output shapes, state-dict round trips,
and eager == compiled (inference, BN-folded inference, training steps) on narrow models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import ops, optim
from dualflow.vision import models

# (constructor, kwargs) of narrow models and a small input for each; (N, 3, S, S).
NARROW = {
    "resnet18_cifar": (models.resnet18, {"cifar_stem": True, "width": 0.125}, 32),
    "resnet34_imagenet": (models.resnet34, {"width": 0.125}, 64),
    "resnet50_imagenet": (models.resnet50, {"width": 0.0625}, 64),
    "resnet50_cifar": (models.resnet50, {"cifar_stem": True, "width": 0.0625}, 32),
    "vgg11_cifar": (models.vgg11, {"cifar_stem": True, "width": 0.0625}, 32),
    "vgg11_bn_imagenet": (models.vgg11_bn, {"width": 0.0625}, 64),
    "vgg16_bn_cifar": (models.vgg16_bn, {"cifar_stem": True, "width": 0.0625}, 32),
    "mobilenet_v2_cifar": (models.mobilenet_v2, {"cifar_stem": True, "width": 0.25}, 32),
    "mobilenet_v2_imagenet": (models.mobilenet_v2, {"width": 0.25}, 64),
}

# torchvision's published parameter counts at 1000 classes.
COUNTS = {
    "resnet18": 11_689_512,
    "resnet34": 21_797_672,
    "resnet50": 25_557_032,
    "mobilenet_v2": 3_504_872,
}
SLOW_COUNTS = {  # construction takes several seconds each (the RNG fills 100M+ weights)
    "resnet101": 44_549_160,
    "resnet152": 60_192_808,
    "vgg11": 132_863_336,
    "vgg11_bn": 132_868_840,
    "vgg16": 138_357_544,
    "vgg16_bn": 138_365_992,
}


def _count(model: Any) -> int:
    return sum(p.numel() for p in model.params())


def _build(name: str, num_classes: int = 10) -> Any:
    make, kwargs, _ = NARROW[name]
    dualflow.random.seed(0)
    return make(num_classes=num_classes, **kwargs)


def _images(name: str, n: int = 2) -> np.ndarray:
    size = NARROW[name][2]
    return np.random.default_rng(0).normal(size=(n, 3, size, size)).astype(np.float32)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_parameter_count_matches_torchvision(name: str) -> None:
    assert _count(getattr(models, name)()) == COUNTS[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW_COUNTS))
def test_parameter_count_matches_torchvision_large(name: str) -> None:
    assert _count(getattr(models, name)()) == SLOW_COUNTS[name]


@pytest.mark.parametrize("name", sorted(NARROW))
def test_output_shape(name: str) -> None:
    model = _build(name, num_classes=7)
    assert model(_images(name)).shape == (2, 7)


TORCHVISION_NAMES = {
    "resnet18_cifar": [
        "conv1.weight",
        "bn1.running_mean",
        "bn1.num_batches_tracked",
        "layer1.0.conv1.weight",
        "layer1.1.bn2.running_var",
        "layer2.0.downsample.0.weight",
        "layer4.0.downsample.1.bias",
        "fc.weight",
        "fc.bias",
    ],
    "resnet50_imagenet": ["layer1.0.conv3.weight", "layer1.0.downsample.0.weight", "fc.bias"],
    "vgg11_bn_imagenet": [
        "features.0.weight",
        "features.1.running_mean",
        "features.4.weight",
        "classifier.0.weight",
        "classifier.3.bias",
        "classifier.6.weight",
    ],
    "vgg11_cifar": ["features.0.weight", "features.3.bias", "classifier.6.weight"],
    "mobilenet_v2_cifar": [
        "features.0.0.weight",
        "features.0.1.running_var",
        "features.1.conv.0.0.weight",
        "features.1.conv.1.weight",
        "features.2.conv.0.0.weight",
        "features.2.conv.3.running_mean",
        "features.18.0.weight",
        "classifier.1.weight",
    ],
}


@pytest.mark.parametrize("name", sorted(TORCHVISION_NAMES))
def test_torchvision_names(name: str) -> None:
    keys = set(_build(name).state_dict())
    assert set(TORCHVISION_NAMES[name]) <= keys


def test_full_size_shapes_follow_torchvision() -> None:
    state = models.resnet18().state_dict()
    assert state["layer2.0.downsample.0.weight"].shape == (128, 64, 1, 1)
    assert state["fc.weight"].shape == (1000, 512)
    mobile = models.mobilenet_v2().state_dict()
    assert mobile["features.2.conv.1.0.weight"].shape == (96, 1, 3, 3)  # depthwise
    assert mobile["classifier.1.weight"].shape == (1000, 1280)


@pytest.mark.parametrize("name", ["resnet18_cifar", "vgg11_bn_imagenet", "mobilenet_v2_cifar"])
def test_state_dict_round_trip(name: str) -> None:
    source, target = _build(name), _build(name)
    dualflow.random.seed(1)
    for p in source.params():  # make the two differ everywhere before loading
        p.raw_array[...] = np.random.default_rng(1).normal(size=p.shape)
    state = {k: v.numpy().copy() for k, v in source.state_dict().items()}
    target.load_state_dict(state)
    x = _images(name)
    source.eval(), target.eval()
    np.testing.assert_array_equal(source(x).numpy(), target(x).numpy())
    for key, value in target.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), state[key])


def test_init_follows_torchvision() -> None:
    model = models.vgg11_bn(cifar_stem=True, width=0.25)
    conv = model.features[0].weight.numpy()  # kaiming normal, fan_out = 16 * 9
    assert abs(conv.std() - np.sqrt(2 / (16 * 9))) < 0.03
    assert np.all(model.features[0].bias.numpy() == 0)
    assert np.all(model.features[1].weight.numpy() == 1)
    fc = model.classifier[0].weight.numpy()
    assert abs(fc.std() - 0.01) < 0.002 and np.all(model.classifier[0].bias.numpy() == 0)


PARITY = ["resnet18_cifar", "vgg11_bn_imagenet", "mobilenet_v2_cifar"]


@pytest.mark.parametrize("name", PARITY)
@pytest.mark.parametrize("passes", ["O0", "O2"])
def test_compiled_inference_matches_eager(name: str, passes: str) -> None:
    """O2 folds every batch norm into its conv: equal within float32 rounding."""
    model = _build(name).eval()
    for p in model.modules():  # non-trivial running statistics, so folding changes weights
        if isinstance(p, dualflow.nn.BatchNorm2d):
            p.running_mean.raw_array[...] = np.linspace(-0.2, 0.2, p.num_features)
            p.running_var.raw_array[...] = np.linspace(0.5, 1.5, p.num_features)
    x, x2 = _images(name), _images(name)[::-1].copy()
    with dualflow.no_grad():
        fn = dualflow.compile(model, passes=passes, fallback="error")
        fn(dualflow.tensor(x))
        got = fn(dualflow.tensor(x2)).numpy()  # the second call runs the compiled plan
        want = model(dualflow.tensor(x2)).numpy()
    assert fn.stats().plan_runs >= 1
    if passes == "O0":
        np.testing.assert_array_equal(got, want)
    else:
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


def _training(model: Any) -> Callable[[Any, Any], Any]:
    opt = optim.SGD(list(model.params()), lr=0.05)

    def step(x: Any, t: Any) -> Any:
        opt.zero_grad()
        loss = ops.softmax_cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


@pytest.mark.parametrize("name", PARITY)
def test_training_steps_match_eager(name: str) -> None:
    """Three SGD steps (train mode: batch statistics, running-stat updates, dropout) give the same
    losses, parameters and buffers eager and compiled."""
    rng = np.random.default_rng(3)
    batches = [
        ((_images(name, 4) + rng.normal(size=1)).astype(np.float32), rng.integers(0, 10, size=4))
        for _ in "abc"
    ]
    results = []
    for compiled in (False, True):
        model = _build(name)
        step = _training(model)
        fn = dualflow.compile(step, fallback="error") if compiled else step
        dualflow.random.seed(5)  # the same dropout masks on both sides
        losses = [fn(dualflow.tensor(x), dualflow.tensor(t)).numpy() for x, t in batches]
        state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
        results.append((losses, state, fn))
    (eager_losses, eager_state, _), (losses, state, fn) = results
    assert fn.stats().plan_runs >= 1, fn.stats()
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6)
    for key, want in eager_state.items():
        np.testing.assert_allclose(state[key], want, rtol=1e-4, atol=1e-5, err_msg=key)


@pytest.mark.slow
def test_full_width_resnet18_cifar_training_matches_eager() -> None:
    def build() -> Any:
        dualflow.random.seed(0)
        return models.resnet18(10, cifar_stem=True)

    x = np.random.default_rng(0).normal(size=(8, 3, 32, 32)).astype(np.float32)
    t = np.arange(8) % 10
    states = []
    for compiled in (False, True):
        model = build()
        step = _training(model)
        fn = dualflow.compile(step, fallback="error") if compiled else step
        for _ in range(2):
            fn(dualflow.tensor(x), dualflow.tensor(t))
        states.append({k: v.numpy().copy() for k, v in model.state_dict().items()})
    for key, want in states[0].items():
        np.testing.assert_allclose(states[1][key], want, rtol=1e-4, atol=1e-5, err_msg=key)

"""``model.predict``: preprocessing (resize shorter side, center crop, ImageNet normalization),
eval mode without grad, softmax probabilities; and ``topk``.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow
from dualflow.vision import models
from dualflow.vision.models.predict import IMAGENET_MEAN, IMAGENET_STD


def _model(**kwargs: object) -> models.ResNet:
    dualflow.random.seed(0)
    return models.resnet18(num_classes=6, width=0.125, **kwargs)


def _image(h: int = 40, w: int = 48) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def test_uint8_list_and_float_batch_agree_and_are_deterministic() -> None:
    model = _model(cifar_stem=True)
    images = [_image(), _image()[::-1].copy()]
    probs = model.predict(images)
    batch = np.stack([im.transpose(2, 0, 1) / np.float32(255) for im in images])
    np.testing.assert_allclose(model.predict(batch), probs, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(model.predict(images), probs)
    assert probs.shape == (2, 6) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-6)
    assert not np.allclose(probs[0], probs[1])


def test_predict_uses_eval_mode_and_restores_training() -> None:
    model = _model(cifar_stem=True)
    model.train()
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    first = model.predict(_image())
    assert model.training  # restored
    for key, value in model.state_dict().items():  # no running-statistics update
        np.testing.assert_array_equal(value.numpy(), before[key], err_msg=key)
    np.testing.assert_array_equal(model.predict([_image()]), first)
    assert all(p.grad is None for p in model.params())


def test_preprocess_sizes_and_normalization() -> None:
    cifar, imagenet = _model(cifar_stem=True), _model()
    assert (cifar.input_size, cifar.resize_size) == (32, 32)
    assert (imagenet.input_size, imagenet.resize_size) == (224, 256)
    flat = np.full((50, 70, 3), 128, np.uint8)
    out = cifar.preprocess([flat])
    assert out.shape == (1, 3, 32, 32)
    want = (128 / 255 - np.array(IMAGENET_MEAN)) / np.array(IMAGENET_STD)
    np.testing.assert_allclose(out[0, :, 5, 7], want, rtol=1e-5)
    assert imagenet.preprocess(np.zeros((300, 260, 3), np.uint8)).shape == (1, 3, 224, 224)
    gray = cifar.preprocess(np.full((32, 32), 255, np.uint8))  # HW grayscale -> 3 channels
    np.testing.assert_allclose(gray[0, :, 0, 0], (1 - np.array(IMAGENET_MEAN)) / IMAGENET_STD)


def test_center_crop_keeps_the_middle() -> None:
    model = _model(cifar_stem=True)
    image = np.zeros((32, 64, 3), np.uint8)
    image[:, 16:48] = 255  # the central 32 columns are white, the rest black
    out = model.preprocess([image])[0]
    np.testing.assert_allclose(out[:, :, 0], out[:, :, 31])
    np.testing.assert_allclose(out[:, 0, 0], (1 - np.array(IMAGENET_MEAN)) / IMAGENET_STD)


def test_imagenet_stem_predict() -> None:
    probs = _model().predict([_image(250, 300)])
    assert probs.shape == (1, 6)
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-6)


def test_bad_images_raise() -> None:
    with pytest.raises(ValueError, match="HWC uint8 or CHW float"):
        _model(cifar_stem=True).predict([np.zeros((32, 32, 5), np.uint8)])


def test_topk() -> None:
    probs = np.array([[0.1, 0.5, 0.4], [0.7, 0.2, 0.1]], np.float32)
    idx, values = models.topk(probs, k=2)
    assert idx.tolist() == [[1, 2], [0, 1]]
    np.testing.assert_allclose(values, [[0.5, 0.4], [0.7, 0.2]])
    idx, _ = models.topk(_model(cifar_stem=True).predict([_image()]), k=6)
    assert sorted(idx[0].tolist()) == list(range(6))

"""``ImageClassifier``: the model zoo's base class with ChainerCV's ``predict(images)``, plus the
preprocessing it applies (bilinear resize of the shorter side, center crop, normalization) and a
``topk`` helper, on ``dualflow.vision.transforms``. Images are HWC uint8 (or HW) or CHW floats
in [0, 1] (or HW).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dualflow._config import no_grad
from dualflow.nn import Module
from dualflow.tensor.core import tensor
from dualflow.vision import transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _to_chw_float(image: Any) -> np.ndarray:
    array = np.asarray(image)
    if array.dtype == np.uint8:  # HWC (or HW) bytes
        array = array.astype(np.float32) / 255.0
        array = array[None] if array.ndim == 2 else array.transpose(2, 0, 1)
    else:  # CHW (or HW) floats in [0, 1]
        array = array.astype(np.float32)
        array = array[None] if array.ndim == 2 else array
    if array.ndim != 3 or array.shape[0] not in (1, 3):
        raise ValueError(
            f"predict: expected an HWC uint8 or CHW float image with 1 or 3 channels, got shape "
            f"{np.shape(image)} and dtype {np.asarray(image).dtype}"
        )
    return np.repeat(array, 3, axis=0) if array.shape[0] == 1 else array


def preprocess(
    image: Any, resize: int, crop: int, mean: Sequence[float], std: Sequence[float]
) -> np.ndarray:
    """One image to a normalized CHW float32 array: shorter side to ``resize``, center ``crop``.

    Example:
        >>> out = preprocess(np.zeros((40, 60, 3), np.uint8), 32, 32, (0.5,) * 3, (0.5,) * 3)
        >>> out.shape, float(out.min())
        ((3, 32, 32), -1.0)
    """
    chw = _to_chw_float(image)
    chw = transforms.resize(chw, resize, axes=(1, 2))  # torchvision's Resize(int): shorter side
    chw = transforms.center_crop(chw, crop, axes=(1, 2))
    return transforms.normalize(chw, mean, std, channel_axis=0).astype(np.float32)


def topk(probs: Any, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` most probable classes of each row: (indices, probabilities), best first.

    Example:
        >>> idx, p = topk(np.array([[0.1, 0.6, 0.3]]), k=2)
        >>> idx.tolist(), p.tolist()
        ([[1, 2]], [[0.6, 0.3]])
    """
    probs = np.asarray(probs)
    order = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    return order, np.take_along_axis(probs, order, axis=-1)


class ImageClassifier(Module):
    """Base class of the zoo's classifiers: ``predict`` preprocesses with the model's own
    ``resize_size``, ``input_size``, ``mean`` and ``std`` (ImageNet's 256/224, or 32/32 with a
    CIFAR stem) and returns softmax probabilities.

    Example:
        >>> from dualflow import nn
        >>> class Tiny(ImageClassifier):
        ...     def __init__(self):
        ...         super().__init__(input_size=8)
        ...         self.fc = nn.Linear(3, 2)
        ...     def forward(self, x):
        ...         return self.fc(x.mean(axis=(2, 3)))
        >>> Tiny().predict([np.zeros((8, 8, 3), np.uint8)]).shape
        (1, 2)
    """

    def __init__(
        self,
        input_size: int = 224,
        resize_size: int | None = None,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
    ) -> None:
        super().__init__()
        self.input_size = int(input_size)
        # torchvision's 256 -> 224 ratio; a 32×32 model uses the whole image.
        default_resize = 256 if self.input_size == 224 else self.input_size
        self.resize_size = int(resize_size or default_resize)
        self.mean, self.std = tuple(mean), tuple(std)

    def preprocess(self, images: Any) -> np.ndarray:
        """A list, a batch (N, ...) or one image -> a normalized (N, 3, S, S) float32 batch."""
        if isinstance(images, np.ndarray) and images.ndim == 4:
            images = list(images)
        elif not isinstance(images, list | tuple):
            images = [images]
        crop = self.input_size
        return np.stack(
            [preprocess(im, self.resize_size, crop, self.mean, self.std) for im in images]
        )

    def predict(self, images: Any) -> np.ndarray:
        """Class probabilities (N, num_classes) for ``images``, in eval mode without grad; the
        model's training mode is restored afterwards."""
        batch = self.preprocess(images)
        device = next(iter(self.params())).device
        was_training = self.training
        self.eval()
        try:
            with no_grad():
                logits = self(tensor(batch, device=device)).numpy().astype(np.float64)
        finally:
            self.train(was_training)
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)

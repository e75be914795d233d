"""``make_grid`` and ``save_image``: torchvision's layout, normalization, padding and rounding."""

from __future__ import annotations

import io

import numpy as np
import pytest

import dualflow
from dualflow.vision.utils import make_grid, save_image


def test_grid_layout_padding_and_channel_repeat() -> None:
    images = np.arange(5 * 1 * 2 * 3, dtype=np.float32).reshape(5, 1, 2, 3)
    grid = make_grid(dualflow.tensor(images), nrow=2, padding=1, pad_value=-1.0).numpy()
    assert grid.shape == (3, 3 * 3 + 1, 2 * 4 + 1)  # 3 rows of 2, single channel -> RGB
    np.testing.assert_array_equal(grid[0], grid[2])
    np.testing.assert_array_equal(grid[0, 1:3, 1:4], images[0, 0])
    np.testing.assert_array_equal(grid[0, 1:3, 5:8], images[1, 0])
    np.testing.assert_array_equal(grid[0, 4:6, 1:4], images[2, 0])
    assert grid[0, 0, 0] == -1.0 and (grid[:, 7:9, 5:8] == -1.0).all()  # the empty sixth cell


def test_single_image_and_normalize() -> None:
    one = make_grid([np.full((3, 2, 2), 4.0, np.float32)])
    assert one.shape == (3, 2, 2)
    x = np.array([[[[0.0, 2.0]]], [[[4.0, 8.0]]]], np.float32)
    grid = make_grid(x, normalize=True, padding=0).numpy()[0, 0]
    np.testing.assert_allclose(grid, [0.0, 0.25, 0.5, 1.0])
    each = make_grid(x, normalize=True, scale_each=True, padding=0).numpy()[0, 0]
    np.testing.assert_allclose(each, [0.0, 1.0, 0.0, 1.0])
    clipped = make_grid(x, normalize=True, value_range=(0.0, 4.0), padding=0).numpy()[0, 0]
    np.testing.assert_allclose(clipped, [0.0, 0.5, 1.0, 1.0])
    with pytest.raises(TypeError, match="value_range"):
        make_grid(x, normalize=True, value_range=[0, 1])


def test_save_image_rounds_like_torchvision() -> None:
    pil = pytest.importorskip("PIL.Image")
    x = np.array([[[[0.0, 0.5, 1.0, 2.0]]]], np.float32)
    buffer = io.BytesIO()
    save_image(x, buffer, format="png")
    pixels = np.asarray(pil.open(io.BytesIO(buffer.getvalue())))
    assert pixels.shape == (1, 4, 3) and pixels[0, :, 0].tolist() == [0, 128, 255, 255]

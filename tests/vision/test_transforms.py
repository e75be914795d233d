"""Transforms against hand-computed values, seeded determinism, and the class forms."""

from __future__ import annotations

import numpy as np
import pytest

from dualflow.vision import transforms as T

RAMP = np.array([[0.0, 1.0], [2.0, 3.0]])


def test_resize_2x2_ramp_to_4x4_matches_half_pixel_bilinear() -> None:
    # Output centres at (j + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25, clamped to [0, 1].
    w = np.array([0.0, 0.25, 0.75, 1.0])
    expected = 2 * w[:, None] + w[None, :]
    np.testing.assert_allclose(T.resize(RAMP, (4, 4)), expected)


def test_resize_identity_and_downsample_average() -> None:
    img = np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(T.resize(img, (3, 4)), img)
    # Halving: each output centre falls midway between two input pixels.
    np.testing.assert_allclose(T.resize(np.array([[0.0, 2.0, 4.0, 6.0]]), (1, 2)), [[1.0, 5.0]])


def test_resize_int_sets_shorter_side_and_keeps_channels_and_dtype() -> None:
    img = np.zeros((10, 20, 3), np.uint8)
    out = T.resize(img, 5)
    assert out.shape == (5, 10, 3) and out.dtype == np.uint8
    assert T.resize(np.zeros((20, 10)), 5).shape == (10, 5)


def test_resize_uint8_rounds_and_batch_axes() -> None:
    img = np.array([[0, 255]], np.uint8)
    np.testing.assert_array_equal(T.resize(img, (1, 4)), [[0, 64, 191, 255]])
    batch = np.stack([RAMP, RAMP + 1])[:, None]  # (2, 1, 2, 2): NCHW
    out = T.resize(batch, (4, 4), axes=(-2, -1))
    assert out.shape == (2, 1, 4, 4)
    np.testing.assert_allclose(out[1, 0], T.resize(RAMP, (4, 4)) + 1)


def test_center_crop_offsets() -> None:
    img = np.arange(25).reshape(5, 5)
    np.testing.assert_array_equal(T.center_crop(img, 3), img[1:4, 1:4])
    np.testing.assert_array_equal(T.center_crop(img, (1, 2)), img[2:3, 2:4])  # round(1.5) = 2
    np.testing.assert_array_equal(T.center_crop(img[None], 3, axes=(1, 2))[0], img[1:4, 1:4])
    with pytest.raises(ValueError, match="larger"):
        T.center_crop(img, 6)


def test_random_crop_is_a_window_of_the_padded_image_and_seeded() -> None:
    img = np.arange(1, 17).reshape(4, 4)
    padded = np.pad(img, 1)
    for seed in range(5):
        out = T.random_crop(img, 4, pad=1, rng=seed)
        windows = [padded[i : i + 4, j : j + 4] for i in range(3) for j in range(3)]
        assert any((out == w).all() for w in windows)
        np.testing.assert_array_equal(out, T.random_crop(img, 4, pad=1, rng=seed))
    crops = {T.random_crop(img, 2, rng=np.random.default_rng(0)).tobytes() for _ in range(3)}
    assert len(crops) == 1


def test_flip() -> None:
    img = np.arange(6).reshape(1, 3, 2)  # HWC
    np.testing.assert_array_equal(T.hflip(img), img[:, ::-1])
    assert T.random_horizontal_flip(img, p=0.0, rng=0) is img
    np.testing.assert_array_equal(T.random_horizontal_flip(img, p=1.0, rng=0), img[:, ::-1])


def test_normalize_and_to_chw() -> None:
    hwc = np.array([[[0, 255], [51, 102]]], np.uint8)  # H=1, W=2, C=2
    chw = T.to_chw(hwc)
    assert chw.shape == (2, 1, 2) and chw.dtype == np.float32
    np.testing.assert_allclose(chw, [[[0.0, 0.2]], [[1.0, 0.4]]], rtol=1e-6)
    out = T.normalize(chw, mean=[0.0, 0.5], std=[0.2, 0.5])
    np.testing.assert_allclose(out, [[[0.0, 1.0]], [[1.0, -0.2]]], rtol=1e-5)
    hwc_out = T.normalize(hwc.astype(np.float32), [0.0, 255.0], [1.0, 255.0], channel_axis=-1)
    np.testing.assert_allclose(hwc_out[0, 0], [0.0, 0.0])
    assert T.to_chw(np.zeros((3, 4), np.uint8)).shape == (1, 3, 4)


def test_random_resized_crop_seeded_and_full_scale_is_resize() -> None:
    img = np.random.default_rng(0).random((12, 16, 3))
    a = T.random_resized_crop(img, (6, 8), rng=3)
    assert a.shape == (6, 8, 3)
    np.testing.assert_array_equal(a, T.random_resized_crop(img, (6, 8), rng=3))
    # scale 1 and the image's own aspect ratio leave only the whole image (then resized)
    whole = T.random_resized_crop(img, (6, 8), scale=(1.0, 1.0), ratio=(4 / 3, 4 / 3), rng=0)
    np.testing.assert_allclose(whole, T.resize(img, (6, 8)))


def test_classes_compose_and_seeded_sequences() -> None:
    img = np.random.default_rng(1).integers(0, 256, (8, 8, 3), dtype=np.uint8)

    def pipeline() -> T.Compose:
        return T.Compose(
            [
                T.RandomResizedCrop(6, seed=0),
                T.RandomCrop(6, pad=2, seed=1),
                T.RandomHorizontalFlip(seed=2),
                T.ToCHW(),
                T.Normalize([0.5] * 3, [0.25] * 3),
            ]
        )

    first, second = pipeline(), pipeline()
    outs = [first(img) for _ in range(4)]
    assert all(o.shape == (3, 6, 6) for o in outs)
    for out in outs:
        np.testing.assert_array_equal(out, second(img))
    assert len({o.tobytes() for o in outs}) > 1  # the generator advances between calls
    assert "RandomCrop(size=6, pad=2" in repr(first)
    np.testing.assert_array_equal(T.CenterCrop(2)(img), img[3:5, 3:5])
    assert T.Resize((4, 4))(img).shape == (4, 4, 3)


def _cupy():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.zeros(1)
    except Exception:  # cupy without a usable CUDA device
        pytest.skip("no CUDA device")
    return cupy


@pytest.mark.gpu
def test_transforms_run_on_cupy_and_match_numpy() -> None:
    cp = _cupy()
    img = np.random.default_rng(0).integers(0, 256, (10, 12, 3), dtype=np.uint8)
    gpu = cp.asarray(img)
    pipeline = [
        lambda x: T.resize(x, (7, 9)),
        lambda x: T.random_resized_crop(x, 5, rng=4),
        lambda x: T.random_crop(x, 5, pad=1, rng=1),
        lambda x: T.random_horizontal_flip(x, p=1.0, rng=0),
        T.to_chw,
        lambda x: T.normalize(x, [0.5] * 3, [0.2] * 3),
        lambda x: T.center_crop(x, 3, axes=(1, 2)),
    ]
    cpu_out, gpu_out = img, gpu
    for step in pipeline:
        cpu_out, gpu_out = step(cpu_out), step(gpu_out)
        assert type(gpu_out).__module__.startswith("cupy")
        np.testing.assert_allclose(cp.asnumpy(gpu_out), cpu_out, rtol=1e-5, atol=1e-5)

"""Resampling layers: ``Upsample`` (nearest, nearest-exact, linear, bilinear, trilinear, area),
``UpsamplingNearest2d``, ``UpsamplingBilinear2d``, ``PixelShuffle`` and ``PixelUnshuffle``.

``Upsample`` checks its options when built and resamples with ``nn.functional.interpolate`` (the
one implementation of PyTorch's index rules), as PyTorch's does.
"""

from __future__ import annotations

from typing import Any

from dualflow import ops
from dualflow.errors import ShapeError
from dualflow.nn.functional.resample import MODES, interpolate
from dualflow.nn.module import Module
from dualflow.tensor.core import Tensor


def _check_mode(mode: str, align_corners: bool | None) -> None:
    if mode not in MODES:
        raise ValueError(f"Upsample: mode must be one of {MODES}, got {mode!r}")
    if align_corners is not None and mode not in ("linear", "bilinear", "trilinear"):
        raise ValueError(
            "Upsample: align_corners option can only be set with the interpolating modes: "
            f"linear | bilinear | trilinear (got mode {mode!r})"
        )


class Upsample(Module):
    """Upsample (N, C, L), (N, C, H, W) or (N, C, D, H, W) inputs by ``size`` or
    ``scale_factor`` (PyTorch's ``nn.Upsample``; modes nearest, nearest-exact, linear, bilinear,
    trilinear, area).

    Example:
        >>> import numpy as np
        >>> up = Upsample(scale_factor=2)
        >>> up
        Upsample(scale_factor=2.0, mode='nearest')
        >>> up(np.arange(4.0).reshape(1, 1, 2, 2)).tolist()[0][0][0]
        [0.0, 0.0, 1.0, 1.0]
    """

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        _check_mode(mode, align_corners)
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor: Any = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Any) -> Tensor:
        """Resample ``x``."""
        return interpolate(
            x, self.size, self.scale_factor, self.mode, self.align_corners,
            self.recompute_scale_factor,
        )  # fmt: skip

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(mode="nearest")`` for 4-D inputs.

    Example:
        >>> UpsamplingNearest2d(scale_factor=2)
        UpsamplingNearest2d(scale_factor=2.0, mode='nearest')
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(mode="bilinear", align_corners=True)`` for 4-D inputs.

    Example:
        >>> import numpy as np
        >>> UpsamplingBilinear2d(size=3)(np.array([[[[0.0, 2.0]]]])).tolist()
        [[[[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]]]
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


def _factor(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


class PixelShuffle(Module):
    """Rearrange (*, C*r², H, W) into (*, C, H*r, W*r) with ``r = upscale_factor``.

    Example:
        >>> import numpy as np
        >>> PixelShuffle(2)(np.arange(8.0).reshape(1, 4, 1, 2)).tolist()
        [[[[0.0, 2.0, 1.0, 3.0], [4.0, 6.0, 5.0, 7.0]]]]
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = _factor("PixelShuffle: upscale_factor", upscale_factor)

    def forward(self, x: Any) -> Tensor:
        """Shuffle channels of ``x`` into space."""
        r, shape = self.upscale_factor, tuple(x.shape)
        if len(shape) < 3 or shape[-3] % (r * r):
            raise ShapeError(
                f"PixelShuffle: expected (*, C*r^2, H, W) with r={r}, got shape {shape}"
            )
        lead, (c, h, w) = shape[:-3], shape[-3:]
        x = ops.reshape(x, lead + (c // (r * r), r, r, h, w))
        k = len(lead)
        x = ops.transpose(x, tuple(range(k)) + tuple(k + i for i in (0, 3, 1, 4, 2)))
        return ops.reshape(x, lead + (c // (r * r), h * r, w * r))

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """Rearrange (*, C, H*r, W*r) into (*, C*r², H, W) with ``r = downscale_factor``.

    Example:
        >>> import numpy as np
        >>> PixelUnshuffle(2)(np.arange(4.0).reshape(1, 1, 2, 2)).tolist()
        [[[[0.0]], [[1.0]], [[2.0]], [[3.0]]]]
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = _factor("PixelUnshuffle: downscale_factor", downscale_factor)

    def forward(self, x: Any) -> Tensor:
        """Fold space of ``x`` into channels."""
        r, shape = self.downscale_factor, tuple(x.shape)
        if len(shape) < 3 or shape[-2] % r or shape[-1] % r:
            raise ShapeError(
                f"PixelUnshuffle: expected (*, C, H*r, W*r) with r={r}, got shape {shape}"
            )
        lead, (c, h, w) = shape[:-3], shape[-3:]
        x = ops.reshape(x, lead + (c, h // r, r, w // r, r))
        k = len(lead)
        x = ops.transpose(x, tuple(range(k)) + tuple(k + i for i in (0, 2, 4, 1, 3)))
        return ops.reshape(x, lead + (c * r * r, h // r, w // r))

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"

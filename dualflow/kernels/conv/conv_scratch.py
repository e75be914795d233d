"""What each CPU convolution kernel allocates besides its inputs and result: the scratch facts.

The memory planner adds an op's ``scratch`` to the live bytes at its step (DESIGN: predicted
peak within 10% of the measured one). These follow ``conv_gemm``'s routing by shapes alone (so a
plan knows which kernel a step will run) and each kernel's own buffers: columns, channels-last
copies, Winograd tiles, partial sums.
"""

from __future__ import annotations

from dualflow.kernels.base.windows import Pair
from dualflow.kernels.conv import channels_first_columns, pointwise_conv, valid_taps, winograd
from dualflow.kernels.conv.conv_gemm import conv_out_hw, images_per_chunk


def _winograd_scratch(item: int, geometry: dict, ksize: Pair, channels: Pair, out: tuple) -> bool:
    """``_winograd`` from shapes alone, for the scratch facts (float32/float64 on the CPU)."""
    return item in (4, 8) and winograd.runs(geometry, ksize, channels, out[:2], out[2])


def _pointwise_scratch(item: int, ksize: Pair, pad: Pair, groups: int) -> bool:
    """``pointwise_conv.runs`` from shapes alone, for the scratch facts (CPU float32/64)."""
    return item in (4, 8) and pointwise_conv.takes(ksize, pad, groups)


def _source_bytes(x_shape: tuple, ksize: Pair, pad: Pair, item: int) -> int:
    n, c, h, w = x_shape
    if tuple(ksize) == (1, 1) and tuple(pad) == (0, 0):
        return 0  # the columns come from x's strided pixels
    return n * (h + 2 * pad[0]) * (w + 2 * pad[1]) * c * item


def conv2d_scratch(x: tuple, w: tuple, item: int, attrs: dict) -> int:
    """Bytes ``conv2d`` holds besides its inputs and result: the padded channels-last input,
    the weight in column order, the channels-last result and one chunk of columns.

    Example:
        >>> a = {"stride": (1, 1), "pad": (1, 1), "dilation": (1, 1), "groups": 1}
        >>> conv2d_scratch((2, 6, 8, 8), (4, 6, 3, 3), 4, a)  # 1200 + 216 + 512 + 6912 floats
        35360
    """
    (n, _, h, wd), (o, cg, kh, kw) = x, w
    stride, pad, dilation, groups = (attrs[k] for k in ("stride", "pad", "dilation", "groups"))
    ho, wo = conv_out_hw((h, wd), (kh, kw), stride, pad, dilation)
    if _winograd_scratch(item, attrs, (kh, kw), (cg, o), (ho, wo, n)):
        return winograd.conv2d_scratch(x, w, item, pad)
    if item in (4, 8) and channels_first_columns.takes(cg, groups):
        return channels_first_columns.conv2d_scratch(x, w, (ho, wo), item)
    if _pointwise_scratch(item, (kh, kw), pad, groups):
        return pointwise_conv.conv2d_scratch(x, w, item, stride)
    if item in (4, 8) and valid_taps.takes(attrs, (kh, kw), (cg, o), (h, wd), (ho, wo)):
        return valid_taps.scratch(x, (cg, o), (kh, kw), (ho, wo), item)
    per_image = ho * wo * kh * kw * cg * groups * item
    chunk = images_per_chunk(n, per_image) * per_image
    grouped = chunk // (kh * kw * cg) * (o // groups) if groups > 1 else 0  # matmul's own result
    weight, result = o * cg * kh * kw * item, n * ho * wo * o * item
    return _source_bytes(x, (kh, kw), pad, item) + weight + result + chunk + grouped


def conv2d_grad_weight_scratch(x: tuple, gy: tuple, item: int, attrs: dict) -> int:
    """Bytes ``conv2d_grad_weight`` holds besides its inputs and result: the padded input, the
    channels-last gradient, one chunk of columns and the per-chunk weight gradients.

    Example:
        >>> a = {"ksize": (3, 3), "stride": (1, 1), "pad": (1, 1), "dilation": (1, 1),
        ...      "groups": 1}
        >>> conv2d_grad_weight_scratch((2, 6, 8, 8), (2, 4, 8, 8), 4, a)
        35360
    """
    (n, c, _, _), (_, o, ho, wo) = x, gy
    (kh, kw), pad = attrs["ksize"], attrs["pad"]
    if _winograd_scratch(item, attrs, (kh, kw), (c, o), (ho, wo, n)):
        return winograd.conv2d_grad_weight_scratch(x, gy, item)
    if item in (4, 8) and channels_first_columns.takes(c, attrs["groups"]):
        return channels_first_columns.conv2d_grad_weight_scratch(x, gy, (kh, kw), item)
    if _pointwise_scratch(item, (kh, kw), pad, attrs["groups"]):
        return pointwise_conv.conv2d_grad_weight_scratch(x, gy, item, attrs["stride"])
    per_image = ho * wo * kh * kw * c * item
    step = images_per_chunk(n, per_image)
    weight = o * c // attrs["groups"] * kh * kw * item
    sums = weight * (2 if step < n else 1)  # the running sum and the last chunk's part
    gradient = n * ho * wo * o * item
    return _source_bytes(x, (kh, kw), pad, item) + gradient + step * per_image + sums


def conv_transpose2d_scratch(x: tuple, w: tuple, item: int, attrs: dict) -> int:
    """Bytes ``conv_transpose2d`` holds besides its inputs and result: the channels-last input,
    the weight in column order, the image (padded only off numba's path, whose col2im writes the
    crop alone) and one chunk of columns.

    Example:
        >>> a = {"stride": (1, 1), "pad": (1, 1), "dilation": (1, 1), "groups": 1,
        ...      "output_padding": (0, 0)}
        >>> conv_transpose2d_scratch((2, 4, 8, 8), (4, 3, 3, 3), 4, a)
        17840
    """
    (n, cin, h, wd), (_, cog, kh, kw) = x, w
    stride, pad, dilation, groups = (attrs[k] for k in ("stride", "pad", "dilation", "groups"))
    out = [
        (x[2 + k] - 1) * stride[k]
        - 2 * pad[k]
        + dilation[k] * (w[2 + k] - 1)
        + attrs["output_padding"][k]
        + 1
        for k in range(2)
    ]
    if item in (4, 8) and winograd.runs_transposed(attrs, w, x, tuple(out)):
        return winograd.conv_transpose2d_scratch(x, w, item, pad)
    if _pointwise_scratch(item, (kh, kw), pad, groups):
        return pointwise_conv.conv_transpose2d_scratch(x, w, item, stride, tuple(out))
    if item in (4, 8) and valid_taps.takes(attrs, (kh, kw), (cog, cin), tuple(out), (h, wd)):
        return valid_taps.scratch(x, (cin, cog), (kh, kw), tuple(out), item)
    per_image = h * wd * kh * kw * cog * groups * item
    chunk = images_per_chunk(n, per_image) * per_image
    grouped = chunk if groups > 1 else 0  # matmul's own result before the strided copy
    # numba's col2im (float32/float64 on numpy) writes the cropped image only
    border = (0, 0) if item in (4, 8) else pad
    image = n * (out[0] + 2 * border[0]) * (out[1] + 2 * border[1]) * groups * cog * item
    inputs = n * h * wd * cin * item + cin * cog * kh * kw * item
    return inputs + image + chunk + grouped

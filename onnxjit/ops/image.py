"""ImageDecoder (opset 20): encoded bytes -> an (H, W, C) uint8 image, decoded with Pillow.

The decoded shape depends on the bytes, so the decode is a Python step at the graph's edge
(LoweringContext.python_output), as onnx's reference does it: the compiled graph carries the
encoded bytes and the caller gets the image. A node reading the image is refused. Pillow is an
optional dependency: `pip install onnxjit[image]`.
"""
from __future__ import annotations

import io

import numpy as np

from .. import scalar_expr as S
from ..errors import InputError
from ..registry import register

_FORMATS = ("RGB", "BGR", "Grayscale")


@register("ImageDecoder", since=20)
def ImageDecoder(ctx, encoded, pixel_format="RGB"):
    if pixel_format not in _FORMATS:
        ctx.fail(f"pixel_format {pixel_format!r} is not one of {list(_FORMATS)}")
    if encoded.dtype != np.uint8 or encoded.rank != 1:
        ctx.fail(f"expects a 1-D uint8 tensor of encoded bytes, got {encoded.dtype}"
                 f"{list(encoded.shape)}")
    try:
        import PIL.Image
    except ImportError:
        ctx.fail("decoding images needs Pillow (pip install onnxjit[image])")
    copy = ctx.elementwise(S.operand(0), encoded, dtype=encoded.dtype)   # a Value of its own

    def decode(data):
        try:
            img = PIL.Image.open(io.BytesIO(np.ascontiguousarray(data).tobytes()))
            img.load()
        except Exception as exc:   # Pillow raises UnidentifiedImageError, OSError, ...
            raise InputError(f"ImageDecoder: cannot decode the image ({exc})") from None
        if pixel_format == "Grayscale":
            return np.asarray(img.convert("L"), dtype=np.uint8)[:, :, None].copy()
        rgb = np.asarray(img if img.mode == "RGB" else img.convert("RGB"), dtype=np.uint8)
        return np.ascontiguousarray(rgb[:, :, ::-1] if pixel_format == "BGR" else rgb)
    return ctx.python_output(copy, decode)

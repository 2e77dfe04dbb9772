"""ImageDecoder against onnx's ReferenceEvaluator (both decode with Pillow, the optional
`image` extra, installed with the `test` extra)."""
import io

import numpy as np
import pytest

import onnxjit.backend
from onnxjit.errors import InputError
from test_ops_training import _check, _model

PIL = pytest.importorskip("PIL.Image", reason="ImageDecoder needs the optional Pillow extra")


def _encoded(fmt, seed=0, shape=(6, 7, 3)):
    img = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
    buf = io.BytesIO()
    PIL.fromarray(img).save(buf, format=fmt)
    return np.frombuffer(buf.getvalue(), np.uint8)


@pytest.mark.parametrize("fmt,pixel_format", [("PNG", "RGB"), ("BMP", "BGR"),
                                              ("JPEG", "Grayscale"), ("TIFF", "RGB")])
def test_image_decoder(fmt, pixel_format):
    inputs = {"data": _encoded(fmt)}
    model = _model("ImageDecoder", inputs, ["image"], opsets=(("", 20),),
                   pixel_format=pixel_format)
    (got,) = _check(model, inputs, 0)
    assert got.dtype == np.uint8 and got.shape[:2] == (6, 7)


def test_image_decoder_bad_bytes_is_a_clear_error():
    model = _model("ImageDecoder", {"data": np.zeros(16, np.uint8)}, ["image"],
                   opsets=(("", 20),))
    rep = onnxjit.backend.prepare(model)
    with pytest.raises(InputError, match="ImageDecoder"):
        rep.run([np.arange(16, dtype=np.uint8)])

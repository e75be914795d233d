"""save_safetensors / load_safetensors: round trips, byte-compatibility with the library."""

from __future__ import annotations

import json

import numpy as np
import pytest

import dualflow
from dualflow.errors import CheckpointError
from dualflow.vision.models import resnet18

DTYPES = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")
DTYPES += ("uint16", "uint32", "uint64", "complex64")


def mixed() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = {f"t.{d}": (rng.normal(size=(2, 3)) * 50).astype(d) for d in DTYPES}
    arrays["scalar"] = np.array(1.5, np.float32)
    arrays["empty"] = np.zeros((0, 4), np.float32)
    return arrays


def test_model_round_trip_is_bit_identical(tmp_path):
    model = resnet18(num_classes=10, width=0.25)
    path = tmp_path / "m.safetensors"
    dualflow.save_safetensors(model.state_dict(), path)
    other = resnet18(num_classes=10, width=0.25)
    dualflow.manual_seed(1)
    other.load_state_dict(dualflow.load_safetensors(path))
    for (name, a), (_, b) in zip(model.state_dict().items(), other.state_dict().items()):
        assert a.dtype == b.dtype and a.numpy().tobytes() == b.numpy().tobytes(), name


def test_every_dtype_round_trips(tmp_path):
    arrays = mixed()
    dualflow.save_safetensors(arrays, tmp_path / "a.safetensors", {"note": "x"})
    back, meta = dualflow.load_safetensors(tmp_path / "a.safetensors", metadata=True)
    assert meta == {"note": "x"} and list(back) == sorted(arrays, key=list(back).index)
    for name, array in arrays.items():
        got = back[name].numpy()
        assert got.dtype == array.dtype and got.shape == array.shape
        assert got.tobytes() == array.tobytes()


def test_files_match_the_library_byte_for_byte(tmp_path):
    st = pytest.importorskip("safetensors.numpy", reason="the safetensors package is optional")
    arrays = mixed()
    dualflow.save_safetensors(arrays, tmp_path / "ours.safetensors", {"format": "pt"})
    ours = (tmp_path / "ours.safetensors").read_bytes()
    assert ours == st.save(arrays, metadata={"format": "pt"})
    theirs = st.load(ours)
    assert all(theirs[k].tobytes() == v.tobytes() for k, v in arrays.items())


def test_library_files_load_and_round_trip(tmp_path):
    st = pytest.importorskip("safetensors.numpy", reason="the safetensors package is optional")
    arrays = mixed()
    st.save_file(arrays, tmp_path / "lib.safetensors")
    back = dualflow.load_safetensors(tmp_path / "lib.safetensors")
    assert {k: v.numpy().tobytes() for k, v in back.items()} == {
        k: v.tobytes() for k, v in arrays.items()
    }
    dualflow.save_safetensors(back, tmp_path / "again.safetensors")
    again = (tmp_path / "again.safetensors").read_bytes()
    assert again == (tmp_path / "lib.safetensors").read_bytes()


def test_bfloat16_from_the_library_widens_exactly(tmp_path):
    torch = pytest.importorskip("torch", reason="writing bfloat16 needs torch")
    st = pytest.importorskip("safetensors.torch", reason="the safetensors package is optional")
    x = torch.randn(3, 4).bfloat16()
    st.save_file({"x": x}, tmp_path / "b.safetensors")
    got = dualflow.load_safetensors(tmp_path / "b.safetensors")["x"].numpy()
    np.testing.assert_array_equal(got, x.float().numpy())


def write_raw(path, header: dict, body: bytes) -> None:
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + body)


@pytest.mark.parametrize(
    ("header", "body", "message"),
    [
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "holds 4"),
        ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "needs 12"),
        (
            {
                "a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]},
            },
            b"\0" * 6,
            "overlap",
        ),
        ({"a": {"dtype": "PY", "shape": [1], "data_offsets": [0, 1]}}, b"\0", "malformed"),
        ({"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}}, b"\0", "malformed"),
    ],
)
def test_bad_headers_are_refused(tmp_path, header, body, message):
    path = tmp_path / "bad.safetensors"
    write_raw(path, header, body)
    with pytest.raises(CheckpointError, match=message):
        dualflow.load_safetensors(path)


def test_truncated_and_missing_files(tmp_path):
    path = tmp_path / "t.safetensors"
    dualflow.save_safetensors({"a": np.ones(8, np.float32)}, path)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(CheckpointError, match="truncated"):
        dualflow.load_safetensors(path)
    path.write_bytes(b"\xff" * 12)
    with pytest.raises(CheckpointError, match="header length"):
        dualflow.load_safetensors(path)
    with pytest.raises(CheckpointError, match="cannot read"):
        dualflow.load_safetensors(tmp_path / "missing.safetensors")


def test_unsupported_values_are_refused_before_writing(tmp_path):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match="only tensors and numpy arrays"):
        dualflow.save_safetensors({"a": np.ones(2), "step": 3}, path)
    with pytest.raises(TypeError, match="cannot hold"):
        dualflow.save_safetensors({"a": np.array(["x"])}, path)
    assert not path.exists() and list(tmp_path.iterdir()) == []

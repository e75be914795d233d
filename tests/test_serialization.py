"""dualflow.save / dualflow.load: round trips, atomic writes, and every kind of bad file."""

import json
import os
import zipfile

import numpy as np
import pytest

import dualflow
from dualflow import serialization
from dualflow.errors import CheckpointError
from dualflow.nn import Module, Parameter


class _Tiny(Module):
    def __init__(self, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.w = Parameter(rng.standard_normal((3, 4)).astype(np.float32))
        self.b = Parameter(np.zeros(4, np.float32))
        self.register_buffer("count", dualflow.tensor(np.array([5], np.int64)))

    def forward(self, x):
        return x @ self.w + self.b


def _optimizer_like(model):
    return {
        "state": {
            0: {"step": 3, "m": np.ones((3, 4), np.float32), "v": dualflow.tensor([0.5, 0.25])},
        },
        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False}],
        "name": "adam",
        "scheduler": None,
        "scale": np.float32(0.5),
        "extremes": [float("inf"), -float("inf")],
        "empty": {"list": [], "tuple": (), "dict": {}},
    }


def test_round_trip_module_and_optimizer_state(tmp_path):
    model = _Tiny()
    # keep_vars=True: the parameters themselves, so requires_grad round-trips too (PyTorch's
    # default state dict holds detached tensors)
    obj = {"model": model.state_dict(keep_vars=True), "optim": _optimizer_like(model), "epoch": 7}
    path = tmp_path / "ckpt.npz"
    dualflow.save(obj, path)
    loaded = dualflow.load(path)

    assert loaded["epoch"] == 7
    state = loaded["model"]
    assert list(state) == ["w", "b", "count"]
    for key, value in model.state_dict().items():
        assert isinstance(state[key], dualflow.Tensor)
        assert state[key].dtype == value.dtype
        np.testing.assert_array_equal(state[key].numpy(), value.numpy())
    assert state["w"].requires_grad and not state["count"].requires_grad
    assert state["w"].device == dualflow.Device("cpu")

    other = _Tiny(seed=1)
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.w.numpy(), model.w.numpy())

    optim = loaded["optim"]
    assert list(optim["state"]) == [0]  # int keys stay ints
    assert optim["state"][0]["step"] == 3 and type(optim["state"][0]["step"]) is int
    assert isinstance(optim["state"][0]["m"], np.ndarray)
    assert isinstance(optim["state"][0]["v"], dualflow.Tensor)
    assert optim["param_groups"][0] == {
        "lr": 1e-3,
        "betas": (0.9, 0.999),
        "eps": 1e-8,
        "amsgrad": False,
    }
    assert optim["name"] == "adam" and optim["scheduler"] is None
    assert optim["scale"] == np.float32(0.5) and isinstance(optim["scale"], np.float32)
    assert optim["extremes"] == [float("inf"), -float("inf")]
    assert optim["empty"] == {"list": [], "tuple": (), "dict": {}}


def test_nan_and_exotic_dtypes_round_trip(tmp_path):
    obj = [float("nan"), np.array([1, 2], np.uint8), np.zeros((0, 3)), np.array(True)]
    dualflow.save(obj, tmp_path / "x")
    loaded = dualflow.load(tmp_path / "x")  # the path is used as given: no suffix added
    assert np.isnan(loaded[0])
    assert loaded[1].dtype == np.uint8 and loaded[2].shape == (0, 3) and loaded[3].dtype == bool


def test_file_is_a_plain_npz_with_a_json_manifest(tmp_path):
    path = tmp_path / "ckpt.npz"
    dualflow.save({"a": np.arange(3)}, path)
    with np.load(path, allow_pickle=False) as npz:
        manifest = json.loads(npz["__manifest__"].tobytes())
        assert manifest["format"] == "dualflow-checkpoint"
        assert [key for key, _ in manifest["root"]["items"]] == ["a"]


def test_unsupported_leaf_names_the_key_path_and_writes_nothing(tmp_path):
    path = tmp_path / "ckpt.npz"
    with pytest.raises(TypeError, match=r"function.*\['optim'\]\['hooks'\]\[1\]"):
        dualflow.save({"optim": {"hooks": [1, lambda: 0]}}, path)
    with pytest.raises(TypeError, match="state_dict"):
        dualflow.save({"model": _Tiny()}, path)
    with pytest.raises(TypeError, match="key"):
        dualflow.save({(1, 2): 3}, path)
    with pytest.raises(TypeError, match="object"):
        dualflow.save({"a": np.array([{}], dtype=object)}, path)
    with pytest.raises(ValueError, match="itself"):
        cycle = []
        cycle.append(cycle)
        dualflow.save(cycle, path)
    assert os.listdir(tmp_path) == []


def test_crash_mid_write_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    dualflow.save({"version": 1, "w": np.ones(1000)}, path)
    before = path.read_bytes()

    def crash(file, arrays):
        file.write(b"PK\x03\x04 half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(serialization, "_write_npz", crash)
    with pytest.raises(OSError, match="disk full"):
        dualflow.save({"version": 2, "w": np.zeros(1000)}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.npz"]  # no temporary file left behind
    assert dualflow.load(path)["version"] == 1


def test_save_into_a_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="nowhere"):
        dualflow.save({"a": 1}, tmp_path / "nowhere" / "ckpt.npz")


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "ckpt.npz"
    rng = np.random.default_rng(0)
    dualflow.save({"model": {"w": dualflow.tensor(rng.standard_normal(4096))}, "step": 1}, path)
    return path


def _assert_checkpoint_error(path, *fragments):
    with pytest.raises(CheckpointError) as info:
        dualflow.load(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message
    return message


def test_missing_file(tmp_path):
    _assert_checkpoint_error(tmp_path / "absent.npz", "does not exist")


def test_truncated_to_half(checkpoint):
    data = checkpoint.read_bytes()
    checkpoint.write_bytes(data[: len(data) // 2])
    _assert_checkpoint_error(checkpoint, "truncated or corrupted")


@pytest.mark.parametrize("where", [0.3, 0.5, 0.7, 0.9])
def test_flipped_bytes(checkpoint, where):
    data = bytearray(checkpoint.read_bytes())
    offset = int(len(data) * where)
    data[offset : offset + 4] = bytes(b ^ 0xFF for b in data[offset : offset + 4])
    checkpoint.write_bytes(bytes(data))
    _assert_checkpoint_error(checkpoint)


def test_garbage_and_other_formats(tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(os.urandom(2000))
    _assert_checkpoint_error(garbage, "not an .npz")
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    _assert_checkpoint_error(empty, "not an .npz")
    npy = tmp_path / "array.npy"
    np.save(npy, np.arange(3))
    _assert_checkpoint_error(npy, "not an .npz")


def test_npz_without_manifest(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, w=np.ones(3))
    _assert_checkpoint_error(path, "manifest")


def test_manifest_that_names_a_missing_array(tmp_path):
    path = tmp_path / "broken.npz"
    manifest = {"format": "dualflow-checkpoint", "version": 1, "root": {"t": "tensor", "key": "a7"}}
    np.savez(path, __manifest__=np.frombuffer(json.dumps(manifest).encode(), np.uint8))
    _assert_checkpoint_error(path, "a7")


def test_corrupt_zip_member_crc(checkpoint):
    # Rewrite one stored byte of the biggest member's data without fixing its CRC.
    with zipfile.ZipFile(checkpoint) as zf:
        info = max(zf.infolist(), key=lambda i: i.file_size)
    data = bytearray(checkpoint.read_bytes())
    data[info.header_offset + 30 + len(info.filename) + 200] ^= 0x01
    checkpoint.write_bytes(bytes(data))
    _assert_checkpoint_error(checkpoint, "truncated or corrupted")


def test_any_single_flipped_byte_is_caught_or_harmless(tmp_path):
    # Bytes that zip does not checksum (timestamps, version fields) may flip unnoticed, but then
    # the loaded values must still be exact: corruption is never silent.
    path = tmp_path / "small.npz"
    ref = np.arange(64, dtype=np.float32)
    dualflow.save({"w": dualflow.tensor(ref), "step": 1}, path)
    base = path.read_bytes()
    for offset in range(0, len(base), 13):
        data = bytearray(base)
        data[offset] ^= 0xFF
        path.write_bytes(bytes(data))
        try:
            loaded = dualflow.load(path)
        except CheckpointError:
            continue
        assert loaded["step"] == 1 and np.array_equal(loaded["w"].numpy(), ref), offset

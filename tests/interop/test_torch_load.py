"""load_torch on real ``torch.save`` files: the committed fixture, fresh ones when torch exists."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.errors import CheckpointError
from tests.interop import craft

DATA = Path(__file__).parent / "data"


def flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}/"))
        elif isinstance(value, dualflow.Tensor):
            out[f"{prefix}{key}"] = value.numpy()
    return out


def test_the_committed_fixture_loads_exactly():
    loaded = dualflow.load_torch(DATA / "state_dict.pt")
    assert (loaded["epoch"], loaded["lr"], loaded["tags"]) == (3, 0.1, ["a", "b"])
    want = dict(np.load(DATA / "state_dict_expected.npz"))
    got = flat(loaded)
    assert sorted(got) == sorted(want)
    for name, array in want.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        np.testing.assert_array_equal(got[name], array, err_msg=name)


def test_a_state_dict_loads_into_the_same_architecture():
    state = dualflow.load_torch(DATA / "state_dict.pt")["model"]
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.Flatten(), nn.Linear(4, 2))
    model.load_state_dict(state)
    np.testing.assert_array_equal(model[3].weight.numpy(), state["3.weight"].numpy())
    assert int(model[1].num_batches_tracked) == 0


def test_fresh_files_from_the_installed_torch(tmp_path):
    torch = pytest.importorskip(
        "torch", reason="real PyTorch files need torch (never a dependency)"
    )
    net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.LayerNorm(4))
    sd = net.state_dict()
    sd["shared_view"] = sd["0.weight"][1:, ::2]  # shares the weight's storage
    torch.save(sd, tmp_path / "f.pth")
    got = dualflow.load_torch(tmp_path / "f.pth")
    assert list(got) == list(sd)
    for name, value in sd.items():
        np.testing.assert_array_equal(got[name].numpy(), value.numpy())


def test_a_handmade_archive_with_a_strided_view(tmp_path):
    raw = np.arange(6, dtype="<f4").tobytes()
    obj = {"w": craft.tensor(craft.storage("FloatStorage", "0", 6), 1, (2, 2), (3, 1))}
    craft.archive(tmp_path / "h.pt", craft.pickled(obj), {"0": raw})
    np.testing.assert_array_equal(
        dualflow.load_torch(tmp_path / "h.pt")["w"].numpy(), [[1, 2], [4, 5]]
    )


def test_big_endian_archives_are_swapped(tmp_path):
    raw = np.arange(3, dtype=">i8").tobytes()
    obj = {"n": craft.tensor(craft.storage("LongStorage", "0", 3), 0, (3,), (1,))}
    with zipfile.ZipFile(tmp_path / "be.pt", "w") as z:
        z.writestr("a/data.pkl", craft.pickled(obj))
        z.writestr("a/byteorder", "big")
        z.writestr("a/data/0", raw)
    np.testing.assert_array_equal(dualflow.load_torch(tmp_path / "be.pt")["n"].numpy(), [0, 1, 2])


def test_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        dualflow.load_torch(tmp_path / "nothing.pt")
    (tmp_path / "legacy.pt").write_bytes(b"\x80\x02\x8a\x0alegacy magic")
    with pytest.raises(CheckpointError, match="not a PyTorch zip checkpoint"):
        dualflow.load_torch(tmp_path / "legacy.pt")

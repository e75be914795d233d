"""``dualflow.save(obj, f)`` / ``dualflow.load(f)`` with file objects, as ``torch.save``/``load``
take them (``with open(path, 'wb') as f: torch.save(model.state_dict(), f)``)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import dualflow
from dualflow import nn
from dualflow.errors import CheckpointError


def test_state_dict_round_trip_through_open_files(tmp_path) -> None:
    model = nn.Linear(3, 2)
    path = tmp_path / "model.pt"
    with open(path, "wb") as f:
        dualflow.save(model.state_dict(), f)
    other = nn.Linear(3, 2)
    with open(path, "rb") as f:
        other.load_state_dict(dualflow.load(f))
    np.testing.assert_array_equal(other.weight.numpy(), model.weight.numpy())
    assert dualflow.load(path).keys() == {"weight", "bias"}  # the same file, read by its path


def test_round_trip_through_bytes_io_at_its_position() -> None:
    buffer = io.BytesIO()
    buffer.write(b"header")
    dualflow.save({"x": dualflow.tensor([1.0, 2.0]), "step": 3}, buffer)
    buffer.seek(len(b"header"))
    loaded = dualflow.load(buffer)
    assert loaded["step"] == 3 and loaded["x"].tolist() == [1.0, 2.0]


def test_a_bad_file_object_raises_checkpoint_error_naming_it(tmp_path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a checkpoint")
    with open(path, "rb") as f, pytest.raises(CheckpointError, match=r"notes\.txt.*not an \.npz"):
        dualflow.load(f)
    with pytest.raises(CheckpointError, match=r"<file object>.*truncated or corrupted"):
        dualflow.load(io.BytesIO(b"PK\x03\x04 and then nothing"))


def test_saving_a_module_itself_says_to_save_its_state_dict() -> None:
    with pytest.raises(TypeError, match=r"save its \.state_dict\(\) instead"):
        dualflow.save(nn.Linear(2, 2), io.BytesIO())  # torch.save(model, f) pickles; not here

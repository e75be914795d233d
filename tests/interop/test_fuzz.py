"""Random inputs: safetensors round trips of random arrays; mangled ``.pt`` files only ever load
or raise CheckpointError (never another exception, never run anything)."""

from __future__ import annotations

import contextlib
import tempfile
import zipfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dualflow
from dualflow.errors import CheckpointError

DATA = Path(__file__).parent / "data"
DTYPES = st.sampled_from(["<f8", "<f4", "<f2", "<i8", "<i4", "<i2", "i1", "u1", "?", "<u2"])
ARRAYS = DTYPES.flatmap(lambda d: hnp.arrays(d, hnp.array_shapes(min_dims=0, max_side=4)))
NAMES = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=8)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(NAMES.filter(lambda n: n != "__metadata__"), ARRAYS, max_size=5))
def test_safetensors_round_trip(arrays):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.safetensors"
        dualflow.save_safetensors(arrays, path)
        back = dualflow.load_safetensors(path)
    assert sorted(back) == sorted(arrays)
    for name, array in arrays.items():
        got = back[name].numpy()
        assert got.shape == array.shape and got.dtype == array.dtype.newbyteorder("=")
        assert got.tobytes() == array.astype(got.dtype).tobytes()


PICKLE = zipfile.ZipFile(DATA / "state_dict.pt").read("state_dict/data.pkl")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(PICKLE) - 1), st.integers(0, 255)), max_size=4))
def test_mangled_pickles_load_or_raise_checkpoint_error(edits):
    data = bytearray(PICKLE)
    for position, byte in edits:
        data[position] = byte
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.pt"
        with zipfile.ZipFile(DATA / "state_dict.pt") as source, zipfile.ZipFile(path, "w") as z:
            for info in source.infolist():
                raw = bytes(data) if info.filename.endswith("data.pkl") else source.read(info)
                z.writestr(info.filename, raw)
        with contextlib.suppress(CheckpointError):
            dualflow.load_torch(path)
        assert sorted(p.name for p in Path(folder).iterdir()) == ["m.pt"]

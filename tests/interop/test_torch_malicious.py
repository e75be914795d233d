"""Malicious ``.pt`` files: refused with a CheckpointError, nothing run, nothing written."""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

import dualflow
from dualflow.errors import CheckpointError
from dualflow.interop import torch_load
from tests.interop import craft

DATA = Path(__file__).parent / "data"
FLOATS = np.arange(4, dtype="<f4").tobytes()


class Payload:
    """Pickles as a call of ``os.system`` (what a malicious ``__reduce__`` does)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def refused(path: Path, match: str) -> None:
    before = files_in(path.parent.parent)
    with pytest.raises(CheckpointError, match=match):
        dualflow.load_torch(path)
    assert files_in(path.parent.parent) == before  # nothing written anywhere near


@pytest.fixture
def box(tmp_path: Path) -> Path:
    (tmp_path / "box").mkdir()
    return tmp_path / "box"


def test_a_reduce_payload_is_refused_without_running(box):
    marker = box.parent / "pwned"
    craft.archive(box / "evil.pt", pickle.dumps({"w": Payload(marker)}, protocol=2), {})
    refused(box / "evil.pt", r"refusing the global (posix|os)\.system")
    assert not marker.exists()


@pytest.mark.parametrize(
    "name",
    [
        ("builtins", "eval"),
        ("torch.nn.modules.linear", "Linear"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("torch", "load"),
        ("collections", "defaultdict"),
    ],
)
def test_globals_outside_the_allow_list(box, name):
    obj = {"x": craft.Call(craft.Global(*name), ("1",))}
    craft.archive(box / "g.pt", craft.pickled(obj), {})
    refused(box / "g.pt", rf"refusing the global {name[0]}\.{name[1]}")


def test_protocol0_inst_opcode_goes_through_the_allow_list(box):
    craft.archive(box / "i.pt", b"(S'touch x'\nios\nsystem\n.", {})
    refused(box / "i.pt", r"refusing the global os\.system")


def test_build_cannot_change_an_allowed_object(box):
    kind = craft.Global("torch", "FloatStorage")
    attempts = [((None, {"dtype": "O"}), "tries to set 'dtype'"), ({"dtype": "O"}, "__dict__")]
    for state, match in attempts:
        craft.archive(box / "b.pt", craft.pickled({"k": craft.Build(kind, state)}), {})
        refused(box / "b.pt", match)
    assert dualflow.load_torch(DATA / "state_dict.pt")["extra"]["row"].dtype == "float32"


@pytest.mark.parametrize("entry", ["../evil.txt", "/tmp/evil.txt", "archive/../../evil.txt"])
def test_zip_slip_entries(box, entry):
    craft.archive(box / "z.pt", craft.pickled({}), {}, extra={entry: b"owned"})
    refused(box / "z.pt", "unsafe entry name")
    assert not (box.parent / "evil.txt").exists()


def test_truncated_archives(box):
    data = (DATA / "state_dict.pt").read_bytes()
    for cut in (len(data) // 2, len(data) - 30, 100):
        (box / "t.pt").write_bytes(data[:cut])
        refused(box / "t.pt", "not a PyTorch zip checkpoint|truncated or corrupted")


def test_a_storage_larger_than_its_entry(box):
    obj = {"w": craft.tensor(craft.storage("FloatStorage", "0", 10**9), 0, (4,), (1,))}
    craft.archive(box / "s.pt", craft.pickled(obj), {"0": FLOATS})
    refused(box / "s.pt", "declares 1000000000 x FloatStorage")


@pytest.mark.parametrize(
    ("offset", "size", "stride", "match"),
    [
        (2, (4,), (1,), "reads element 5 of 4"),
        (0, (2, 2), (3, 1), "reads element 4 of 4"),
        (0, (10**6, 10**6), (0, 0), "1000000000000 elements from a storage of 4"),
        (0, (2,), (-1,), "malformed"),
        (0, (2, 2), (1,), "malformed"),
    ],
)
def test_views_outside_their_storage(box, offset, size, stride, match):
    obj = {"w": craft.tensor(craft.storage("FloatStorage", "0", 4), offset, size, stride)}
    craft.archive(box / "v.pt", craft.pickled(obj), {"0": FLOATS})
    refused(box / "v.pt", match)


def test_storage_keys_must_name_entries_of_the_data_folder(box):
    obj = {"w": craft.tensor(craft.storage("FloatStorage", "../data.pkl", 4), 0, (4,), (1,))}
    craft.archive(box / "k.pt", craft.pickled(obj), {"0": FLOATS})
    refused(box / "k.pt", "not in the archive")


def test_compressed_entries_are_refused(box):
    with zipfile.ZipFile(box / "c.pt", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", craft.pickled({}))
    refused(box / "c.pt", "is compressed")


def test_one_storage_named_with_two_dtypes(box):
    a = craft.tensor(craft.storage("FloatStorage", "0", 4), 0, (4,), (1,))
    b = craft.tensor(craft.storage("IntStorage", "0", 4), 0, (4,), (1,))
    craft.archive(box / "d.pt", craft.pickled({"a": a, "b": b}), {"0": FLOATS})
    refused(box / "d.pt", "named as 4 x FloatStorage and as 4 x IntStorage")


def test_bare_storages_or_types_in_the_result(box):
    obj = {"s": craft.storage("FloatStorage", "0", 4)}
    craft.archive(box / "r.pt", craft.pickled(obj), {"0": FLOATS})
    refused(box / "r.pt", r"holds a Storage at <root>\['s'\]")


def test_deep_nesting_is_a_checkpoint_error(box):
    depth = 100_000
    craft.archive(box / "n.pt", b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".", {})
    refused(box / "n.pt", "malformed")


def test_storages_may_not_add_up_to_more_than_the_file(box, monkeypatch):
    """Overlapping zip entries could make many storages out of the same bytes; zipfile's own
    name check stops the plain forms, and the total read is capped by the file's size."""
    tensors = {
        f"w{i}": craft.tensor(craft.storage("FloatStorage", str(i), 4), 0, (4,), (1,))
        for i in range(3)
    }
    craft.archive(box / "o.pt", craft.pickled(tensors), {str(i): FLOATS for i in range(3)})
    assert dualflow.load_torch(box / "o.pt")["w2"].shape == (4,)
    monkeypatch.setattr(torch_load.os.path, "getsize", lambda path: 40)  # pretend a tiny file
    refused(box / "o.pt", "add up to more bytes than the file holds")


def test_a_whole_model_pickle_gets_a_hint(box):
    obj = craft.Call(craft.Global("torch.nn.modules.container", "Sequential"), ())
    craft.archive(box / "m.pt", craft.pickled(obj), {})
    refused(box / "m.pt", r"save and load model\.state_dict\(\) instead")

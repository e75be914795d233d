"""kernels.base.per_machine: a value is measured once per machine key and read back from the
signed kernels cache, the defaults switch skips the measurement, and ``keep`` False leaves
nothing in the cache."""

from __future__ import annotations

import pytest

from dualflow.kernels.base import per_machine


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(per_machine.ENV, raising=False)
    return tmp_path / "kernels"


def _value(calls: list, facts: tuple = (), keep=lambda r: True) -> per_machine.PerMachine:
    def measure() -> dict:
        calls.append(1)
        return {"v": len(calls)}

    return per_machine.PerMachine("probe", measure, lambda r: r["v"], 0, lambda: facts, keep)


def test_measured_once_then_read_in_a_new_process(cache) -> None:
    calls: list = []
    assert _value(calls).get() == 1 and _value(calls).get() == 1  # the second reads the file
    assert calls == [1]
    (entry,) = cache.glob("probe_*.json")
    assert entry.name == f"probe_{per_machine.machine_key()}.json"


def test_other_key_facts_are_another_measurement(cache) -> None:
    calls: list = []
    assert _value(calls, (1,)).get() == 1
    assert _value(calls, (2,)).get() == 2
    assert len(list(cache.glob("probe_*.json"))) == 2


def test_a_value_not_kept_is_measured_again_by_the_next_process(cache) -> None:
    calls: list = []
    first = _value(calls, keep=lambda r: False)
    assert first.get() == 1 and first.get() == 1  # fixed for its process
    assert _value(calls, keep=lambda r: False).get() == 2
    assert not list(cache.glob("probe_*.json"))


def test_defaults_skip_the_measurement(cache, monkeypatch) -> None:
    monkeypatch.setenv(per_machine.ENV, " Defaults ")
    calls: list = []
    assert per_machine.defaults_fixed() and _value(calls).get() == 0 and not calls

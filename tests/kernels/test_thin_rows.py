"""kernels.linalg.thin_rows: the row count of the few-rows route is chosen from measured ratios
by a fixed rule, kept per machine in the kernels cache, and the matmul op's scratch fact counts
the route exactly where the kernel takes it (no timing is asserted: the rule gets ratios)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from dualflow.kernels.base import per_machine
from dualflow.kernels.linalg import gemm, thin_rows
from dualflow.ops.registry import OPS


def test_the_threshold_is_the_prefix_that_saves_most() -> None:
    assert thin_rows.choose({2: 2.5, 8: 1.8, 32: 1.3, 64: 1.05, 128: 0.9, 256: 0.7}) == 64
    # one noisy candidate inside a run of savings does not close the route early
    assert thin_rows.choose({2: 2.5, 8: 0.95, 32: 1.3, 64: 0.8}) == 32
    assert thin_rows.choose({2: 0.9, 8: 0.9}) == 0  # the direct form wins: never transposed
    assert thin_rows.choose({2: 1.01, 8: 1.01}) == 0  # below the margin: not worth the scratch
    assert thin_rows.choose({2: 0.5, 8: 4.0}) == 8  # the product over the prefix decides


def test_the_model_charges_the_copy_to_the_transposed_form_on_every_thread_count() -> None:
    # GEMMs split over threads, the copy does not: more threads, less to gain
    one = thin_rows.predicted_ratio(2.0, 1.0, 0.2, 1)
    two = thin_rows.predicted_ratio(2.0, 1.0, 0.2, 2)
    assert one > two > 1.0
    assert thin_rows.predicted_ratio(1.0, 1.0, 0.0, 2) == 1.0


def test_measure_gives_a_positive_ratio_per_candidate() -> None:
    ratios = thin_rows.measure((16, 32), (2, 8))
    assert sorted(ratios) == [2, 8] and all(r > 0 for r in ratios.values())


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(per_machine.ENV, raising=False)  # measured, not the suite's default
    thin_rows.forget()
    yield tmp_path / "kernels"
    thin_rows.forget()  # the next test reads the real cache's value again


def test_the_choice_is_measured_once_per_machine_and_read_back(fresh_cache, monkeypatch) -> None:
    monkeypatch.setattr(thin_rows, "measure", lambda: {2: 2.0, 8: 1.5, 32: 0.7})
    assert thin_rows.thin_rows() == 8
    (entry,) = fresh_cache.glob("thin_rows_*.json")
    assert thin_rows.machine_key() in entry.name
    thin_rows.forget()  # a new process on the same machine: no measurement

    def fail() -> dict:
        raise AssertionError("measured again although the cache holds the choice")

    monkeypatch.setattr(thin_rows, "measure", fail)
    assert thin_rows.thin_rows() == 8


def test_a_tampered_entry_is_measured_again(fresh_cache, monkeypatch) -> None:
    monkeypatch.setattr(thin_rows, "measure", lambda: {2: 2.0, 8: 0.5})
    assert thin_rows.thin_rows() == 2
    (entry,) = fresh_cache.glob("thin_rows_*.json")
    data = entry.read_bytes()
    entry.write_bytes(data.replace(b'"rows": 2', b'"rows": 9'))  # the signature no longer holds
    thin_rows.forget()
    monkeypatch.setattr(thin_rows, "measure", lambda: {2: 2.0, 8: 2.0})
    with pytest.warns(RuntimeWarning, match="signature"):
        assert thin_rows.thin_rows() == 8
    thin_rows.forget()  # the rewritten entry is read back
    monkeypatch.setattr(thin_rows, "measure", lambda: {2: 0.5})
    assert thin_rows.thin_rows() == 8


def test_an_entry_without_a_row_count_is_measured_again(fresh_cache, monkeypatch) -> None:
    store = thin_rows.open_store("kernels")
    name = f"thin_rows_{thin_rows.machine_key()}.json"
    for payload in (b"not json", json.dumps({"rows": -1}).encode(), b"[]"):
        store.save(name, payload)
        thin_rows.forget()
        monkeypatch.setattr(thin_rows, "measure", lambda: {2: 2.0, 8: 0.5})
        assert thin_rows.thin_rows() == 2


@pytest.mark.parametrize("rows", [1, 3, 4, 5, 16])
def test_the_scratch_fact_counts_the_route_exactly_where_the_kernel_takes_it(
    rows, monkeypatch
) -> None:
    monkeypatch.setattr(gemm, "thin_rows", lambda: 4)
    x = np.ones((rows, 6), np.float32)
    w = np.ones((10, 6), np.float32)
    taken = gemm.thin_times_transposed(x, w.T)
    scratch = OPS["matmul"].scratch(((x.shape, "float32"), (w.T.shape, "float32")), {})
    assert taken == (rows <= 4)
    assert scratch == (rows * 10 * 4 if taken else 0)


def test_threads_asking_at_once_get_one_answer(fresh_cache, monkeypatch) -> None:
    answers = iter([8, 2, 2, 2])  # a second measurement would answer differently
    monkeypatch.setattr(thin_rows, "measure", lambda: {2: 2.0, 8: 2.0})
    monkeypatch.setattr(thin_rows, "choose", lambda ratios: next(answers))
    monkeypatch.setattr(per_machine, "open_store", lambda kind: None)  # no cache to agree through
    with ThreadPoolExecutor(4) as pool:
        assert set(pool.map(lambda _: thin_rows.thin_rows(), range(8))) == {8}


def test_the_suite_routes_by_the_fixed_default(monkeypatch) -> None:
    monkeypatch.setenv(per_machine.ENV, "defaults")
    monkeypatch.setattr(thin_rows, "measure", lambda: {2: 2.0})  # would choose 2
    thin_rows.forget()
    try:
        assert thin_rows.thin_rows() == thin_rows.DEFAULT == 64
    finally:
        thin_rows.forget()

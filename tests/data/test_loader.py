"""DataLoader: seeded order, batching, collate, prefetch, and exact mid-epoch resume."""

import gc
import threading

import numpy as np
import pytest

import dualflow
from dualflow.data import DataLoader, Prefetcher, TensorDataset


def _dataset(n=23):
    return TensorDataset(np.arange(n * 2, dtype=np.float32).reshape(n, 2), np.arange(n) % 5)


def _ids(batches):
    # The first feature column is 2 * sample index, so it identifies each sample.
    return [(x.numpy()[:, 0] / 2).astype(int).tolist() for x, _ in batches]


def _flat(batches):
    return [i for batch in batches for i in batch]


def _epochs(loader, count):
    return [_ids(loader) for _ in range(count)]


def test_len_and_drop_last():
    assert len(DataLoader(_dataset(), batch_size=5)) == 5
    loader = DataLoader(_dataset(), batch_size=5, drop_last=True)
    assert len(loader) == 4
    batches = _ids(loader)
    assert [len(b) for b in batches] == [5, 5, 5, 5]
    assert [len(b) for b in _ids(DataLoader(_dataset(), batch_size=5))][-1] == 3


def test_batches_are_tensors_and_labels_stay_integer():
    x, y = next(iter(DataLoader(_dataset(), batch_size=4)))
    assert isinstance(x, dualflow.Tensor) and isinstance(y, dualflow.Tensor)
    assert x.dtype == np.float32 and y.dtype == np.int64 and y.tolist() == [0, 1, 2, 3]


def test_no_shuffle_is_in_order():
    assert _flat(_ids(DataLoader(_dataset(), batch_size=4))) == list(range(23))


def test_same_seed_same_order_different_seed_different():
    a = _epochs(DataLoader(_dataset(), batch_size=4, shuffle=True, seed=7), 3)
    b = _epochs(DataLoader(_dataset(), batch_size=4, shuffle=True, seed=7), 3)
    c = _epochs(DataLoader(_dataset(), batch_size=4, shuffle=True, seed=8), 3)
    assert a == b
    assert a != c
    assert a[0] != a[1]  # a new permutation every epoch
    assert sorted(_flat(a[0])) == list(range(23))


def test_fast_path_equals_item_by_item_collate():
    ds = _dataset()
    fast = list(DataLoader(ds, batch_size=4, shuffle=True, seed=2))
    slow_ds = [ds[i] for i in range(len(ds))]  # a plain list has no get_batch
    slow = list(DataLoader(slow_ds, batch_size=4, shuffle=True, seed=2))
    for (xf, yf), (xs, ys) in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(xf.numpy(), xs.numpy())
        assert yf.dtype == ys.dtype and yf.tolist() == ys.tolist()


def test_dict_samples_and_custom_collate():
    samples = [{"x": np.full(3, i, np.float32), "y": i} for i in range(5)]
    batch = next(iter(DataLoader(samples, batch_size=5)))
    assert batch["x"].shape == (5, 3) and batch["y"].tolist() == [0, 1, 2, 3, 4]
    sizes = list(DataLoader(samples, batch_size=2, collate_fn=len))
    assert sizes == [2, 2, 1]


def test_prefetch_gives_the_same_batches():
    plain = _epochs(DataLoader(_dataset(), batch_size=3, shuffle=True, seed=5), 2)
    fetched = _epochs(DataLoader(_dataset(), batch_size=3, shuffle=True, seed=5, prefetch=2), 2)
    assert plain == fetched


class _Exploding:
    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 6:
            raise KeyError(f"bad sample {i}")
        return np.float32(i)


def test_prefetch_reraises_worker_exceptions():
    loader = DataLoader(_Exploding(), batch_size=2, prefetch=3)
    seen = []
    with pytest.raises(KeyError, match="bad sample 6"):
        for batch in loader:
            seen.append(batch.tolist())
    assert seen == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert loader.state_dict()["position"] == 3  # the failed batch was not handed out
    assert not _prefetch_threads()


def _prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "dualflow-prefetch"]


def test_prefetch_thread_stops_when_iteration_stops_early():
    loader = DataLoader(_dataset(200), batch_size=2, prefetch=2)
    for i, _ in enumerate(loader):
        if i == 3:
            break
    gc.collect()
    assert not _prefetch_threads()
    it = iter(loader)
    next(it)
    it.close()
    assert not _prefetch_threads()


def test_prefetcher_close_unblocks_a_waiting_worker():
    p = Prefetcher(iter(range(100)), depth=1)
    assert next(iter(p)) == 0
    p.close()
    assert not p.alive


@pytest.mark.parametrize("prefetch", [0, 2])
@pytest.mark.parametrize("stop_at", [0, 1, 4, 6])
def test_resume_mid_epoch_reproduces_the_uninterrupted_run(prefetch, stop_at):
    def make():
        return DataLoader(_dataset(), batch_size=4, shuffle=True, seed=11, prefetch=prefetch)

    reference = [b for epoch in _epochs(make(), 3) for b in epoch]

    first = make()
    consumed = _ids(first)  # epoch 0 complete
    it = iter(first)
    for _ in range(stop_at):
        consumed += _ids([next(it)])
    state = first.state_dict()
    expected_epoch, expected_pos = (2, 0) if stop_at == 6 else (1, stop_at)
    assert state == {"epoch": expected_epoch, "position": expected_pos, "seed": 11}
    del it

    restored = DataLoader(_dataset(), batch_size=4, shuffle=True, seed=0, prefetch=prefetch)
    restored.load_state_dict(dualflow_roundtrip(state))
    rest = _ids(restored)
    while len(consumed) + len(rest) < len(reference):
        rest += _ids(restored)
    assert consumed + rest == reference


def dualflow_roundtrip(state):
    # State values come back from checkpoints as numpy scalars/0-d arrays as well as ints.
    return {k: np.int64(v) for k, v in state.items()}


def test_break_then_iterate_again_continues_the_epoch():
    loader = DataLoader(_dataset(), batch_size=4, shuffle=True, seed=3)
    order = loader.batch_indices(0)
    for i, _ in enumerate(loader):
        if i == 1:
            break
    rest = _ids(loader)
    assert rest == [b.tolist() for b in order[2:]]
    assert loader.epoch == 1
    loader.set_epoch(0)
    assert _ids(loader) == [b.tolist() for b in order]


def test_stale_iterator_raises():
    loader = DataLoader(_dataset(), batch_size=4)
    old = iter(loader)
    next(old)
    iter(loader)
    with pytest.raises(RuntimeError, match="stale"):
        next(old)


def test_bad_arguments_and_states():
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(_dataset(), batch_size=0)
    with pytest.raises(ValueError, match="seed"):
        DataLoader(_dataset(), seed=-1)
    loader = DataLoader(_dataset(), batch_size=4)
    with pytest.raises(KeyError, match="position"):
        loader.load_state_dict({"epoch": 0, "seed": 0})
    with pytest.raises(ValueError, match="past the end"):
        loader.load_state_dict({"epoch": 0, "position": 7, "seed": 0})
    assert loader.state_dict() == {"epoch": 0, "position": 0, "seed": 0}


def test_state_survives_a_checkpoint(tmp_path):
    loader = DataLoader(_dataset(), batch_size=4, shuffle=True, seed=9)
    it = iter(loader)
    next(it)
    path = tmp_path / "loader.npz"
    dualflow.save({"loader": loader.state_dict()}, path)
    restored = DataLoader(_dataset(), batch_size=4, shuffle=True)
    restored.load_state_dict(dualflow.load(path)["loader"])
    assert _ids(restored) == _ids(it)


def test_empty_dataset():
    loader = DataLoader([], batch_size=3)
    assert len(loader) == 0 and list(loader) == []
    assert loader.state_dict() == loader.state_dict() == {"epoch": 1, "position": 0, "seed": 0}

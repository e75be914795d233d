"""PyTorch idioms under dynamic sizes: each equals eager at every size, and the ones written to
keep sizes as expressions serve new sizes from one template (issue 39).

Sizes reach library code as ``SymInt``s: a check such as ``isinstance(n, int)`` or a hash of a
shape took another branch or guarded every value (``chunk`` raised, ``stack`` and ``F.pad``
traced each size). A new idiom goes here with its expected reach.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualflow as df
import dualflow.nn.functional as F

IDIOMS = {
    "view": lambda x: x.view(-1) * 2,
    "flatten": lambda x: x.flatten(1).sum(1),
    "permute": lambda x: x.permute(1, 0).sum(0),
    "cat": lambda x: df.cat([x, x * 2]).sum(0),
    "stack": lambda x: df.stack([x, x]).mean(0),
    "repeat": lambda x: x.repeat(2, 1).sum(0),
    "expand": lambda x: x[:, :1].expand(x.shape[0], 3),
    "pad": lambda x: F.pad(x, (0, x.shape[0])),
    "new_zeros": lambda x: x.new_zeros(x.shape) + x,
    "zeros_size": lambda x: df.zeros(x.shape[0], 2) + x[:, :2],
    "narrow": lambda x: x.narrow(0, 0, x.shape[0] // 2 + 1),
    "slice_half": lambda x: x[: x.shape[0] // 2 + 1],
    "neg_index": lambda x: x[x.shape[0] - 1],
    "topk": lambda x: x.sum(1).topk(x.shape[0] // 2 + 1)[0],
    "sort": lambda x: x.sort(0)[0],
    "argmax": lambda x: x.argmax(0).float(),
    "max0": lambda x: x.max(0)[0],
    "flip": lambda x: x.flip(0),
    "tril": lambda x: df.tril(df.ones(x.shape[0], x.shape[0])) @ x,
    "arange_mask": lambda x: x.masked_fill((df.arange(x.shape[0]) < x.shape[0] // 2)[:, None], 0.0),
    "index_select": lambda x: x.index_select(0, df.arange(x.shape[0] - 1)),
    "where": lambda x: df.where(x > 1, x, -x),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:]),
    "softmax0": lambda x: F.softmax(x, 0),
    "cumsum": lambda x: x.cumsum(0),
    "split_list": lambda x: x.split([x.shape[0] // 2, x.shape[0] - x.shape[0] // 2])[1].sum(0),
    "reshape3": lambda x: x.reshape(x.shape[0], -1, 1).sum(2),
    "loop_rows": lambda x: sum(x[i] for i in range(x.shape[0])),
    "unbind": lambda x: x.unbind(0)[0] + x.unbind(0)[-1],
    "chunk": lambda x: x.chunk(3)[0].sum(0),
    "matmul_t": lambda x: x @ x.T,
    "std": lambda x: x.std(0),
    "var_unbiased": lambda x: x.var(0, unbiased=True),
    "mean_all": lambda x: x.mean() * x.numel(),
    "size_div": lambda x: x.sum() / x.size(0),
    "float_size": lambda x: x * float(x.shape[0]),
    "shape_tuple": lambda x: x.reshape(tuple(x.shape)) + 1,
    "interpolate": lambda x: F.interpolate(x[None, None], scale_factor=2, mode="nearest")[0, 0],
    "unsqueeze_b": lambda x: (x.unsqueeze(0) + x.unsqueeze(1)).sum(),
    "diag": lambda x: df.diag(x[:, 0]),
    "eye": lambda x: df.eye(x.shape[0]) @ x,
    "linspace": lambda x: x * df.linspace(0, 1, x.shape[0])[:, None],
    "full": lambda x: df.full((x.shape[0], 3), 2.0) * x,
    "batched_mm": lambda x: df.bmm(x[None], x.T[None])[0],
    "conv1d": lambda x: F.conv1d(x.T[None], df.ones(2, 3, 2))[0],
    "max_pool": lambda x: F.max_pool1d(x.T[None], 2)[0],
    "gather": lambda x: x.gather(0, df.zeros(1, 3, dtype="int64")),
    "nonzero_free": lambda x: (x > 5).float().sum(0),
    "clamp_size": lambda x: x.clamp(max=x.shape[0]),
    "triu_idx": lambda x: x * (df.arange(x.shape[0])[:, None] >= df.arange(3)[None]).float(),
    "mse": lambda x: F.mse_loss(x, df.zeros_like(x)),
    "dropout_eval": lambda x: F.dropout(x, 0.5, training=False),
    "len_x": lambda x: x * len(x),
    "list_shape": lambda x: x.reshape(list(x.shape)[::-1]).sum(0),
    "numel_view": lambda x: x.view(x.numel()).sum(),
    "squeeze_unsq": lambda x: x.unsqueeze(1).squeeze(1),
    "bn_train": lambda x: F.batch_norm(x, None, None, training=True),
    "group_norm": lambda x: F.group_norm(x[None].permute(0, 2, 1), 1)[0],
    "t_contig": lambda x: x.t().contiguous().view(-1),
    "sum_keep": lambda x: x - x.sum(0, keepdim=True) / x.shape[0],
    "cross_entropy": lambda x: F.cross_entropy(x, df.arange(x.shape[0]) % 3),
    "roll": lambda x: x.roll(1, 0),
    "tensor_split_idx": lambda x: df.tensor_split(x, [1])[1].sum(0),
    "einsum": lambda x: df.einsum("ij,kj->ik", x, x),
    "one_hot": lambda x: F.one_hot(df.arange(x.shape[0]) % 3, 3).float() + x[:, :3],
    "embedding": lambda x: F.embedding(df.arange(x.shape[0]) % 2, x[:2]),
    "remainder": lambda x: x % 3 + x // 2,
    "slice_from_end": lambda x: x[x.shape[0] - 1 :] * 2,
}

# idioms that read a size as a plain int (a loop over rows, ``float(n)``, ``topk(k)``, a list of
# sections): they trace each size, correctly; every other one serves new sizes from a template
SPECIALIZING = {
    "neg_index",
    "topk",
    "split_list",
    "loop_rows",
    "unbind",
    "chunk",
    "float_size",
    "interpolate",
    "linspace",
    "clamp_size",
    "len_x",
}
SIZES = [4, 6, 9, 1, 12, 7]


def _outcome(fn, x):
    try:
        return fn(x).numpy()
    except Exception as exc:
        return exc


@pytest.mark.parametrize("name", sorted(IDIOMS))
def test_idiom_equals_eager_at_every_size(name) -> None:
    fn = IDIOMS[name]
    compiled = df.compile(fn, dynamic=True, passes="exact")
    for n in SIZES:
        x = df.tensor((np.arange(n * 3, dtype=np.float32).reshape(n, 3) * 0.37) % 5)
        want, got = _outcome(fn, x), _outcome(compiled, x)
        if isinstance(want, Exception) or isinstance(got, Exception):
            assert type(got) is type(want), (n, want, got)
            continue
        assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True), n
    stats = compiled.stats()
    if name not in SPECIALIZING:
        assert stats.traces <= 3 and stats.plan_runs >= len(SIZES) - 3, stats.retrace_reasons

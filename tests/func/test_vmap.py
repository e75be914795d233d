"""vmap: equal to a Python loop for in_dims/out_dims forms, nested, of grad (per-example
gradients), the three randomness modes, bad dims as errors; compiled equals eager."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import dualflow
from dualflow import func


def _t(*shape: int, seed: int = 0) -> dualflow.Tensor:
    return dualflow.tensor(np.random.default_rng(seed).normal(size=shape))


def _f(x: Any, y: Any) -> Any:
    return (x * y).sum(0).tanh()


@pytest.mark.parametrize("in_dims", [(0, 0), (1, 0), (0, None), (-1, 1)])
def test_matches_a_loop(in_dims: tuple) -> None:
    x, y = _t(4, 4, seed=1), _t(4, 4, seed=2)
    got = func.vmap(_f, in_dims=in_dims)(x, y)

    def pick(t: Any, d: Any, b: int) -> Any:
        return t if d is None else t.numpy().take(b, axis=d)

    want = [
        _f(dualflow.tensor(pick(x, in_dims[0], b)), dualflow.tensor(pick(y, in_dims[1], b)))
        for b in range(4)
    ]
    np.testing.assert_allclose(got.numpy(), np.stack([w.numpy() for w in want]), rtol=1e-14)


def test_out_dims_pytrees_and_nesting() -> None:
    x = _t(2, 3, seed=3)
    a, b = func.vmap(lambda r: (r * 2, {"s": r.sum()}), out_dims=(1, 0))(x)
    np.testing.assert_allclose(a.numpy(), (x * 2).numpy().T)
    np.testing.assert_allclose(b["s"].numpy(), x.numpy().sum(1))
    outer = func.vmap(func.vmap(lambda u, v: u * v, in_dims=(0, None)), in_dims=(0, None))
    v = _t(3, seed=4)
    m = _t(2, 5, 3, seed=5)
    np.testing.assert_allclose(outer(m, v).numpy(), m.numpy() * v.numpy(), rtol=1e-14)
    pair = {"p": x, "q": _t(3, seed=6)}
    got = func.vmap(lambda d: d["p"] + d["q"], in_dims=({"p": 0, "q": None},))(pair)
    np.testing.assert_allclose(got.numpy(), x.numpy() + pair["q"].numpy())


def test_errors() -> None:
    x = _t(2, 3)
    with pytest.raises(ValueError, match="different batch sizes"):
        func.vmap(_f)(x, _t(3, 3))
    with pytest.raises(ValueError, match="at least one input"):
        func.vmap(_f, in_dims=None)(x, x)
    with pytest.raises(ValueError, match="out of range"):
        func.vmap(_f, in_dims=(2, 0))(x, x)
    with pytest.raises(ValueError, match="only Tensors"):
        func.vmap(lambda a, n: a * n, in_dims=(0, 0))(x, 3)
    with pytest.raises(ValueError, match="randomness"):
        func.vmap(_f, randomness="sometimes")
    with pytest.raises(ValueError, match="size 0"):
        func.vmap(lambda a: a)(_t(0, 3))


def _per_example(w: Any, x: Any, y: Any) -> Any:
    def loss(w: Any, xi: Any, yi: Any) -> Any:
        return ((xi @ w).tanh() - yi).pow(2).sum()

    return func.vmap(func.grad(loss), in_dims=(None, 0, 0))(w, x, y)


def test_per_example_gradients_eager_and_compiled() -> None:
    w, x, y = _t(3, 2, seed=1), _t(5, 3, seed=2), _t(5, 2, seed=3)
    got = _per_example(w, x, y)
    for b in range(5):
        wb = w.detach().requires_grad_()
        loss = ((x[b] @ wb).tanh() - y[b]).pow(2).sum()
        loss.backward()
        np.testing.assert_allclose(got[b].numpy(), wb.grad.numpy(), rtol=1e-12)
    compiled = dualflow.compile(_per_example, fallback="error")
    for seed in (4, 5):
        x2 = _t(5, 3, seed=seed)
        np.testing.assert_allclose(
            compiled(w, x2, y).numpy(), _per_example(w, x2, y).numpy(), rtol=1e-12
        )


def _noisy(x: Any) -> Any:
    return x + dualflow.rand(3, dtype=dualflow.float64)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_randomness_modes(compiled: bool) -> None:
    x = dualflow.zeros(4, 3, dtype=dualflow.float64)

    def run(mode: str) -> tuple:
        fn = lambda x: func.vmap(_noisy, randomness=mode)(x)  # noqa: E731
        fn = dualflow.compile(fn, fallback="error") if compiled else fn
        dualflow.manual_seed(0)
        first = fn(x).numpy()
        return first, dualflow.rand(2).numpy()

    same, after_same = run("same")
    assert np.all(same == same[0])
    different, after_different = run("different")
    assert len({tuple(r) for r in different}) == 4
    dualflow.manual_seed(0)
    want_same = dualflow.rand(3, dtype=dualflow.float64).numpy()
    np.testing.assert_array_equal(same[0], want_same)  # the first example's draws
    np.testing.assert_array_equal(after_same, dualflow.rand(2).numpy())  # advanced once
    # one batched draw: the generator advanced once, as for 'same' (torch.func's too)
    np.testing.assert_array_equal(after_same, after_different)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        func.vmap(_noisy)(x)
    assert func.vmap(_noisy, randomness="same")(x).shape == (4, 3)  # the hook was removed
    assert dualflow.rand(1).shape == (1,)


def test_keyword_arguments_are_not_mapped() -> None:
    x = _t(3, 2, seed=7)
    got = func.vmap(lambda r, scale=1.0: r * scale)(x, scale=3.0)
    np.testing.assert_allclose(got.numpy(), 3 * x.numpy())


def _traced_nodes(batch: int) -> int:
    w, x, y = _t(3, 2, seed=1), _t(batch, 3, seed=2), _t(batch, 2, seed=3)
    compiled = dualflow.compile(_per_example, fallback="error")
    compiled(w, x, y)
    return compiled.history[-1].pass_stats[0].nodes_before


def test_per_example_gradients_trace_one_batched_graph() -> None:
    """vmap(grad) batches forward and backward: the traced graph does not grow with the
    batch (a loop would trace one copy of the per-example graph per example)."""
    assert _traced_nodes(2) == _traced_nodes(16)


def test_grad_through_vmap_and_detached_results() -> None:
    w, x = _t(3, seed=1), _t(5, 3, seed=2)
    slope = 1 - np.tanh(x.numpy() * w.numpy()) ** 2
    g = func.grad(lambda w: func.vmap(lambda r: (r * w).tanh().sum())(x).sum())(w)
    np.testing.assert_allclose(g.numpy(), (x.numpy() * slope).sum(0), rtol=1e-12)
    xl = x.detach().requires_grad_()
    func.vmap(lambda r: (r * w).tanh().sum())(xl).sum().backward()  # through a batched input
    np.testing.assert_allclose(xl.grad.numpy(), w.numpy() * slope, rtol=1e-12)
    grads, values = func.vmap(func.grad_and_value(lambda w, r: (r * w).tanh().sum()), (None, 0))(
        w.detach(), x
    )
    assert not grads.requires_grad and not values.requires_grad  # as torch.func returns them
    np.testing.assert_allclose(grads.numpy(), x.numpy() * slope, rtol=1e-12)


def test_ensemble_over_stacked_parameters_eager_and_compiled() -> None:
    model = dualflow.nn.Sequential(
        dualflow.nn.Linear(3, 4), dualflow.nn.ReLU(), dualflow.nn.Linear(4, 2)
    ).double()
    params = {
        k: dualflow.stack([v.detach() * (1 + 0.1 * i) for i in range(5)])
        for k, v in model.named_parameters()
    }
    x = _t(7, 3, seed=4)

    def ensemble(params: Any, x: Any) -> Any:
        call = lambda p, x: func.functional_call(model, p, (x,))  # noqa: E731
        return func.vmap(call, in_dims=(0, None))(params, x)

    want = [
        func.functional_call(model, {k: v[i] for k, v in params.items()}, (x,)) for i in range(5)
    ]
    np.testing.assert_allclose(ensemble(params, x).numpy(), np.stack([w.numpy() for w in want]))
    compiled = dualflow.compile(ensemble, fallback="error")
    for _ in range(2):
        np.testing.assert_allclose(compiled(params, x).numpy(), ensemble(params, x).numpy())


def test_in_place_writes_and_data_reads() -> None:
    x = _t(4, 3, seed=5)

    def bump(r: Any) -> Any:
        y = r * 2
        y.add_(1.0)
        y[0] = 5.0
        return y

    np.testing.assert_allclose(
        func.vmap(bump)(x).numpy(), np.stack([bump(x[b]).numpy() for b in range(4)])
    )
    shared = dualflow.zeros(3, dtype=dualflow.float64)
    with pytest.raises(RuntimeError, match="not batched"):
        func.vmap(lambda r: shared.add_(r))(x)
    with pytest.raises(RuntimeError, match="differs per example"):
        func.vmap(lambda r: r * r.sum().item())(x)
    with pytest.raises(RuntimeError, match="differs per example"):
        func.vmap(lambda r: r if r.sum() > 0 else -r)(x)


def test_dropout_randomness_different_and_same() -> None:
    x = dualflow.ones(4, 200, dtype=dualflow.float64)
    drop = lambda r: dualflow.nn.functional.dropout(r, 0.5, training=True)  # noqa: E731
    different = func.vmap(drop, randomness="different")(x).numpy()
    assert len({tuple(row) for row in different}) == 4
    same = func.vmap(drop, randomness="same")(x).numpy()
    assert np.all(same == same[0])


def test_conv_net_per_example_gradients_eager_and_compiled() -> None:
    nn = dualflow.nn
    model = nn.Sequential(
        nn.Conv2d(2, 3, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(12, 2)
    ).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = _t(4, 2, 6, 6, seed=6)
    y = dualflow.tensor(np.array([0, 1, 1, 0]))

    def loss(p: Any, xi: Any, yi: Any) -> Any:
        logits = func.functional_call(model, p, (xi.unsqueeze(0),))
        return nn.functional.cross_entropy(logits, yi.unsqueeze(0))

    def per_example(p: Any, x: Any, y: Any) -> Any:
        return func.vmap(func.grad(loss), in_dims=(None, 0, 0))(p, x, y)

    got = per_example(params, x, y)
    for b in range(4):
        for k, g in func.grad(loss)(params, x[b], y[b]).items():
            np.testing.assert_allclose(got[k][b].numpy(), g.numpy(), rtol=1e-10, atol=1e-12)
    compiled = dualflow.compile(per_example, fallback="error")
    for _ in range(2):
        for k, g in compiled(params, x, y).items():
            np.testing.assert_allclose(g.numpy(), got[k].numpy(), rtol=1e-10, atol=1e-12)


def _loss(w: Any, xi: Any, yi: Any) -> Any:
    return ((xi @ w).tanh() - yi).pow(2).sum()


def test_grad_of_per_example_gradients_and_per_example_hvps() -> None:
    """Meta-learning shape: grad over vmap(grad) keeps the graph through the batched backward;
    vmap(hvp) gives each example's Hessian-vector product."""
    w, x, y, v = _t(3, 2, seed=1), _t(5, 3, seed=2), _t(5, 2, seed=3), _t(3, 2, seed=4)

    def norms(w: Any) -> Any:
        return func.vmap(func.grad(_loss), (None, 0, 0))(w, x, y).pow(2).sum()

    want = func.grad(lambda w: sum(func.grad(_loss)(w, x[b], y[b]).pow(2).sum() for b in range(5)))
    np.testing.assert_allclose(func.grad(norms)(w).numpy(), want(w).numpy(), rtol=1e-12)
    compiled = dualflow.compile(func.grad(norms), fallback="error")
    for _ in range(2):
        np.testing.assert_allclose(compiled(w).numpy(), want(w).numpy(), rtol=1e-12)
    hvps = func.vmap(lambda xi, yi: func.hvp(lambda w: _loss(w, xi, yi), (w,), (v,))[1][0])(x, y)
    for b in range(5):
        one = func.hvp(lambda w, b=b: _loss(w, x[b], y[b]), (w,), (v,))[1][0]
        np.testing.assert_allclose(hvps[b].numpy(), one.numpy(), rtol=1e-12)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_chunk_size_runs_the_batch_in_pieces(compiled: bool) -> None:
    w, x, y = _t(3, 2, seed=1), _t(7, 3, seed=2), _t(7, 2, seed=3)

    def chunked(w: Any, x: Any, y: Any) -> Any:
        dims = (None, 0, 0)
        return func.vmap(func.grad(_loss), in_dims=dims, out_dims=1, chunk_size=3)(w, x, y)

    run = dualflow.compile(chunked, fallback="error") if compiled else chunked
    want = func.vmap(func.grad(_loss), in_dims=(None, 0, 0), out_dims=1)(w, x, y)
    np.testing.assert_allclose(run(w, x, y).numpy(), want.numpy(), rtol=1e-12)
    noise = dualflow.zeros(5, 3, dtype=dualflow.float64)
    same = func.vmap(_noisy, randomness="same", chunk_size=2)(noise).numpy()
    assert np.all(same == same[0])  # every chunk drew what the first drew
    different = func.vmap(_noisy, randomness="different", chunk_size=2)(noise).numpy()
    assert len({tuple(r) for r in different}) == 5
    with pytest.raises(ValueError, match="chunk_size"):
        func.vmap(_noisy, chunk_size=0)


def _train(compiled: bool) -> list[float]:
    dualflow.manual_seed(0)
    model = dualflow.nn.Linear(3, 2).double()
    opt = dualflow.optim.SGD(model.parameters(), lr=0.1)
    x = _t(5, 3, seed=8)

    def step(x: Any) -> Any:
        opt.zero_grad()
        loss = func.vmap(lambda r: model(r).tanh().sum())(x).sum()
        loss.backward()  # through vmap's result to the module's parameters
        opt.step()
        return loss

    run = dualflow.compile(step, fallback="error") if compiled else step
    return [run(x).item() for _ in range(3)]


def test_a_training_step_through_vmap_compiled_equals_eager() -> None:
    eager = _train(False)
    assert eager[2] < eager[0]
    assert _train(True) == eager


def test_jacfwd_takes_its_vmaps_randomness() -> None:
    x = _t(3, seed=9)
    noisy = lambda x: x * dualflow.rand(3, dtype=dualflow.float64)  # noqa: E731
    with pytest.raises(RuntimeError, match="randomness error mode"):
        func.jacfwd(noisy)(x)  # torch.func's default too
    dualflow.manual_seed(3)
    jac = func.jacfwd(noisy, randomness="same")(x).numpy()
    dualflow.manual_seed(3)
    draws = dualflow.rand(3, dtype=dualflow.float64).numpy()
    np.testing.assert_array_equal(jac, np.diag(draws))  # one draw, shared by every column


def test_shape_errors_name_one_examples_shapes() -> None:
    x = dualflow.ones(5, 3)
    with pytest.raises(dualflow.errors.ShapeError, match=r"\(3,\) @ \(4, 2\)"):
        func.vmap(lambda r: r @ dualflow.ones(4, 2))(x)
    with pytest.raises(dualflow.errors.ShapeError, match=r"shapes \(3,\), \(4,\) do not"):
        func.vmap(lambda r: r + dualflow.ones(4))(x)


def test_printing_a_batched_tensor_shows_its_level_and_value(capsys: Any) -> None:
    x = dualflow.tensor(np.arange(6.0).reshape(2, 3))
    func.vmap(func.vmap(lambda r: print(r) or r))(x[None])
    out = capsys.readouterr().out
    assert out.startswith("BatchedTensor(lvl=2, bdim=0, value=\n    BatchedTensor(lvl=1, bdim=0,")
    assert "[[0., 1., 2.]," in out


@pytest.mark.skipif(
    not hasattr(dualflow.ops.dispatch, "reading"), reason="no lazy re-execution on this branch"
)
def test_a_read_inside_vmap_or_jvp_sees_lazily_recorded_writes() -> None:
    state = dualflow.zeros(3, dtype=dualflow.float64)
    x = dualflow.ones(4, 3, dtype=dualflow.float64)

    def step(x: Any) -> Any:
        state.add_(1.0)  # recorded, not yet run, when the function runs lazily
        mapped = func.vmap(lambda r: r * float(state.numpy().sum()))(x)
        tangent = func.jvp(lambda r: r * float(state.numpy().sum()), (x,), (x,))[1]
        return mapped + tangent  # a forward-mode level forwards the read too

    compiled = dualflow.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the graph break's notice: it runs lazily
        for k in range(1, 4):
            np.testing.assert_array_equal(compiled(x).numpy(), np.full((4, 3), 6.0 * k))

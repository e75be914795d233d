"""Captured state is read by reference at every call; ``.grad`` reads, writes and accumulation
behave as in eager; results do not alias graph internals; argument aliasing is respected.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import dualflow
from dualflow import ops, optim
from dualflow.nn import Parameter
from tests.tracer.helpers import assert_same, check_all_traces, check_interpret_matches_plan


def _t(values: Any, **kw: Any) -> dualflow.Tensor:
    return dualflow.tensor(np.asarray(values, np.float64), **kw)


def test_captured_state_is_read_by_reference() -> None:
    w = Parameter(np.array([1.0, 2.0]))
    compiled = dualflow.compile(lambda x: (x * w).sum(), fallback="error")
    x = _t([1.0, 1.0])
    assert compiled(x).item() == 3.0
    assert compiled(x).item() == 3.0
    ops.assign(w, np.array([5.0, 5.0]))  # in place, outside
    assert compiled(x).item() == 10.0
    w.raw_array = np.array([7.0, 1.0])  # a new array object (e.g. a device move)
    assert compiled(x).item() == 8.0
    assert compiled.stats().traces == 1 and compiled.stats().plan_runs == 3


def test_state_shape_change_retraces() -> None:
    w = Parameter(np.ones(2))
    compiled = dualflow.compile(lambda: w.sum())
    compiled()
    w.raw_array = np.ones(3)
    assert compiled().item() == 3.0
    assert compiled.stats().retrace_reasons[1] == "state0.shape: (2,) -> (3,)"


def _accumulate(w: Parameter) -> Any:
    def step(x: Any) -> None:
        (w * w * x).sum().backward()

    return step


def test_grad_accumulates_across_calls_like_eager() -> None:
    w_c, w_e = Parameter(np.array([1.0, 2.0])), Parameter(np.array([1.0, 2.0]))
    compiled = dualflow.compile(_accumulate(w_c), fallback="error")
    eager = _accumulate(w_e)
    for i in range(4):
        x = _t([1.0, float(i)])
        compiled(x)
        eager(x)
        assert_same(w_c.grad, w_e.grad, msg=f"grad after call {i}")
    stats = compiled.stats()  # trace 1 saw .grad None; trace 2 reads and accumulates it
    assert (stats.traces, stats.plan_runs) == (2, 2)
    assert stats.retrace_reasons[1] == "tensor.grad was None when traced and is set now"
    w_c.grad = None  # back to the first trace
    compiled(_t([1.0, 1.0]))
    assert w_c.grad.tolist() == [2.0, 4.0] and compiled.stats().traces == 2
    check_all_traces(compiled)


def test_backward_into_arguments_writes_the_current_argument() -> None:
    w = Parameter(np.array([1.0, 2.0]))

    def step(x: Any) -> None:
        w.grad = None
        (w * x * x).sum().backward()

    compiled = dualflow.compile(step, fallback="error")
    xs = [_t([1.0, float(i)], requires_grad=True) for i in range(4)]
    for x in xs:
        compiled(x)
        assert w.grad.tolist() == [1.0, x.tolist()[1] ** 2]
    assert [x.grad.tolist() for x in xs] == [[2.0, 4.0 * i] for i in range(4)]
    assert compiled.stats().traces == 1 and compiled.stats().plan_runs == 3
    with_grad = _t([1.0, 5.0], requires_grad=True)
    with_grad.grad = _t([1.0, 1.0])  # arrives with a .grad: accumulates, like eager
    compiled(with_grad)
    assert with_grad.grad.tolist() == [3.0, 21.0]


def test_zero_grad_inside_the_step() -> None:
    results = []
    for compiled_side in (False, True):
        w = Parameter(np.array([1.0, -1.0]))
        opt = optim.SGD([w], lr=0.1)

        def step(x: Any, w: Parameter = w, opt: Any = opt) -> Any:
            opt.zero_grad()
            loss = ((w - x) ** 2).sum()
            loss.backward()
            opt.step()
            return loss.detach()

        fn = dualflow.compile(step, fallback="error") if compiled_side else step
        losses = [fn(_t([0.5, float(i)])) for i in range(4)]
        results.append((losses, w.numpy().copy(), w.grad.numpy().copy(), fn))
    (l_e, w_e, g_e, _), (l_c, w_c, g_c, fn) = results
    assert_same(l_c, l_e)
    assert_same([w_c, g_c], [w_e, g_e])
    assert fn.stats().traces == 1 and fn.stats().plan_runs == 3


def test_grad_set_outside_is_read_by_reference() -> None:
    w = Parameter(np.array([1.0, 2.0]))
    opt = optim.SGD([w], lr=0.5)
    compiled = dualflow.compile(opt.step, fallback="error")
    expected = w.numpy().copy()
    for i in range(3):
        w.grad = _t([1.0, float(i)])
        compiled()
        expected -= 0.5 * np.array([1.0, float(i)])
        np.testing.assert_array_equal(w.numpy(), expected)
    assert compiled.stats().plan_runs == 2


def test_returned_loss_after_backward_and_outputs_connected_to_autograd() -> None:
    w = Parameter(np.array([1.0, 2.0]))
    step = dualflow.compile(lambda x: _backward_and_return(w, x), fallback="error")
    for i in range(3):
        w.grad = None
        loss = step(_t([3.0, float(i)]))
        assert loss.item() == 3.0 + 2.0 * i
        assert w.grad.tolist() == [3.0, float(i)]
    model = dualflow.compile(lambda x: (w * x).sum(), fallback="error")
    for i in range(3):
        w.grad = None
        model(_t([3.0, float(i)])).backward()
        assert w.grad.tolist() == [3.0, float(i)]
    assert model.stats().plan_runs == 2


def _backward_and_return(w: Parameter, x: Any) -> Any:
    loss = (w * x).sum()
    loss.backward()
    return loss


def test_same_tensor_passed_twice_then_distinct_tensors() -> None:
    compiled = dualflow.compile(lambda a, b: a * 2 + b)
    x, y = _t([1.0, 2.0]), _t([10.0, 20.0])
    assert compiled(x, x).tolist() == [3.0, 6.0]
    assert compiled(x, y).tolist() == [12.0, 24.0]


def test_captured_tensor_passed_as_argument_after_other_arguments() -> None:
    w = _t([1.0, 1.0])
    compiled = dualflow.compile(lambda a: a + w)
    assert compiled(_t([10.0, 20.0])).tolist() == [11.0, 21.0]
    assert compiled(w).tolist() == [2.0, 2.0]  # the trace reading w as state is not reused
    assert compiled.stats().traces == 2


def test_argument_that_is_also_captured_state() -> None:
    """A trace made by passing the captured tensor itself serves only calls passing it."""
    w = _t([1.0, 1.0])
    compiled = dualflow.compile(lambda a: a * 10 + w)
    assert compiled(w).tolist() == [11.0, 11.0]
    assert compiled(w).tolist() == [11.0, 11.0]
    assert compiled(_t([10.0, 20.0])).tolist() == [101.0, 201.0]
    assert compiled.stats().traces == 2 and "captured tensor" in compiled.stats().retrace_reasons[1]


def test_results_do_not_alias_graph_constants() -> None:
    compiled = dualflow.compile(lambda x: (x + 1, dualflow.tensor([1.0, 2.0])))
    x = _t([0.0, 0.0])
    compiled(x)
    _, const = compiled(x)
    ops.assign(const, np.array([100.0, 100.0]))
    assert compiled(x)[1].tolist() == [1.0, 2.0]


def test_view_of_state_read_after_assign_matches_eager() -> None:
    def make() -> Any:
        w = _t([1.0, 2.0])

        def fn() -> Any:
            view = w.reshape(2, 1)
            with dualflow.no_grad():
                ops.assign(w, w + 1)
            return view * 1

        return fn

    compiled, eager = dualflow.compile(make()), make()
    for i in range(3):
        assert_same(compiled(), eager(), msg=f"call {i}")


def test_interpreter_agrees_with_plan_on_a_training_step() -> None:
    w = Parameter(np.array([[1.0, 2.0], [3.0, 4.0]]))
    opt = optim.Adam([w], lr=0.1)

    def step(x: Any) -> Any:
        opt.zero_grad()
        loss = ops.tanh(ops.matmul(x, w)).sum()
        loss.backward()
        opt.step()
        if loss > 0:
            ops.assign(w, w * 0.5)
        return loss.detach()

    x = _t([[0.1, 0.2]])
    step(x)  # optimizer state exists before compiling
    compiled = dualflow.compile(step, fallback="error")
    compiled(x)
    check_interpret_matches_plan(compiled, (x,))
    check_interpret_matches_plan(compiled, (_t([[-5.0, -5.0]]),))  # the guard fails in both


def test_assign_to_an_argument_writes_it_at_every_call() -> None:
    def fn(x: Any) -> Any:
        ops.assign(x, x + 1)
        return x * 2

    compiled = dualflow.compile(fn)
    for i in range(3):
        x = _t([float(i), 0.0])
        assert compiled(x).tolist() == [2.0 * i + 2, 2.0]
        assert x.tolist() == [i + 1.0, 1.0], f"call {i}"


def test_assign_into_a_grad_is_an_update() -> None:
    w = Parameter(np.array([1.0, 2.0]))
    w.grad = _t([8.0, 8.0])

    def halve_grad() -> None:
        grad = w.grad
        ops.assign(grad, grad * 0.5)

    compiled = dualflow.compile(halve_grad)
    for expected in (4.0, 2.0, 1.0):
        compiled()
        assert w.grad.tolist() == [expected, expected]


def test_local_buffer_written_with_assign_still_compiles() -> None:
    def fn(x: Any) -> Any:
        buf = dualflow.tensor(np.zeros(2))
        ops.assign(buf, x)
        return buf * 2

    compiled = dualflow.compile(fn)
    for i in range(4):
        assert compiled(_t([float(i), 1.0])).tolist() == [2.0 * i, 2.0]
    assert compiled.stats().plan_runs >= 2, compiled.stats()


def test_changing_the_learning_rate_as_a_float_after_compiling() -> None:
    results = []
    for compiled_side in (False, True):
        w = Parameter(np.array([1.0, 2.0]))
        opt = optim.SGD([w], lr=0.1)

        def step(x: Any, w: Parameter = w, opt: Any = opt) -> None:
            opt.zero_grad()
            (w * x).sum().backward()
            opt.step()

        fn = dualflow.compile(step) if compiled_side else step
        for i in range(4):
            if i == 2:
                opt.param_groups[0]["lr"] = 1.0
            fn(_t([1.0, 1.0]))
        results.append(w.numpy().copy())
    assert_same(results[1], results[0])


def test_lr_scheduler_changes_reach_the_compiled_step() -> None:
    results = []
    for compiled_side in (False, True):
        w = Parameter(np.array([1.0, 2.0]))
        opt = optim.SGD([w], lr=0.1)
        sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

        def step(x: Any, w: Parameter = w, opt: Any = opt) -> None:
            opt.zero_grad()
            (w * x).sum().backward()
            opt.step()

        fn = dualflow.compile(step, fallback="error") if compiled_side else step
        for _ in range(4):
            fn(_t([1.0, 1.0]))
            sched.step()
        results.append(w.numpy().copy())
    assert_same(results[1], results[0])
    np.testing.assert_allclose(results[0], [1.0 - 0.1875, 2.0 - 0.1875], rtol=1e-12)


def _two_runs(change: Any) -> list[Any]:
    results = []
    for compiled_side in (False, True):
        a, b = Parameter(np.array([1.0, 2.0])), Parameter(np.array([1.0, 3.0]))
        opt = optim.SGD([a], lr=0.1, momentum=0.9)

        def step(x: Any, a: Any = a, b: Any = b, opt: Any = opt) -> None:
            opt.zero_grad()
            b.grad = None
            (a * a * b * x).sum().backward()
            opt.step()

        step(_t([1.0, 1.0]))  # optimizer state exists before compiling
        fn = dualflow.compile(step) if compiled_side else step
        for i in range(4):
            if i == 2:
                change(opt, b)
            fn(_t([1.0, 1.0]))
        results.append([a.numpy().copy(), b.numpy().copy()])
    return results


def test_add_param_group_after_compiling() -> None:
    got, want = _two_runs(lambda opt, b: opt.add_param_group({"params": [b]}))[::-1]
    assert_same(got, want)


def test_resetting_optimizer_state_after_compiling() -> None:
    def reset(opt: Any, b: Any) -> None:
        fresh = optim.SGD([Parameter(np.zeros(2))], lr=0.1, momentum=0.9)
        opt.load_state_dict(fresh.state_dict())

    got, want = _two_runs(reset)[::-1]
    assert_same(got, want)


def test_an_alias_made_inside_reads_the_tensors_current_data() -> None:
    # eagerly ``x.detach()`` / ``x.data`` is a new alias of x's array at every call: the trace
    # reads x, not the alias object it made (which kept the first call's array: stale results)
    for alias in (lambda t: t.detach(), lambda t: t.data):
        x = _t(np.arange(6.0).reshape(2, 3))
        w = _t(np.ones((3, 2)), requires_grad=True)

        def product(alias=alias, x=x, w=w) -> dualflow.Tensor:
            return (alias(x) @ w).sum()

        compiled = dualflow.compile(product, fallback="error")
        for i in range(4):
            assert compiled().item() == product().item(), i
            x.data = _t(np.full((2, 3), 10.0 + i))  # x's data rebound outside
        assert compiled.stats().traces == 1 and compiled.stats().plan_runs == 3


def test_a_leaf_detached_inside_and_given_a_grad_does_not_retrace() -> None:
    # a gradient penalty's pattern: backward() also writes the detached leaf's .grad; that leaf
    # is new at every call, so no guard may hold on to the first call's one
    x = _t(np.arange(6.0).reshape(2, 3))
    w = _t(np.ones((3, 2)), requires_grad=True)

    def step() -> dualflow.Tensor:
        xs = x.detach().requires_grad_(True)
        (g,) = dualflow.grad(ops.tanh(xs @ w).sum(), xs, create_graph=True)
        (g**2).sum().backward()
        return w.grad

    compiled = dualflow.compile(step, fallback="error")
    for i in range(3):
        w.grad = None
        got = compiled().numpy()
        w.grad = None
        np.testing.assert_array_equal(got, step().numpy(), err_msg=f"call {i}")
    assert compiled.stats().traces == 1


def test_in_place_writes_through_an_alias_made_inside_after_a_rebind() -> None:
    # p.data.sub_() / p.detach().sub_() inside the step write p's current data, as eager does,
    # also after p.data was rebound outside between calls
    def run(compiled: bool, alias: Any) -> tuple[list[float], list[float]]:
        p = Parameter(np.arange(3.0))
        x = _t(np.ones(3))

        def step() -> dualflow.Tensor:
            loss = (p * x).sum()
            loss.backward()
            with dualflow.no_grad():
                alias(p).sub_(0.1 * p.grad)
            p.grad = None
            return loss

        fn = dualflow.compile(step, fallback="error") if compiled else step
        losses = []
        for i in range(4):
            losses.append(fn().item())
            if i == 1:
                p.data = _t(np.full(3, 5.0))
        return losses, p.numpy().tolist()

    for alias in (lambda t: t.data, lambda t: t.detach()):
        assert run(True, alias) == run(False, alias)

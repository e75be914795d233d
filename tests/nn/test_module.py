"""Module registration order, dotted names, version counter, modes and state dicts."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import dualflow
from dualflow.errors import ShapeError
from dualflow.nn import Module, Parameter


class Leaf(Module):
    def __init__(self, n: int = 2) -> None:
        super().__init__()
        self.weight = Parameter(np.arange(n, dtype=np.float32))
        self.register_buffer("running", dualflow.tensor(np.zeros(n, np.float32)))

    def forward(self, x):
        return x * self.weight


class Tree(Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = Parameter(np.ones(1, np.float32))
        self.first = Leaf()
        self.second = Leaf(3)

    def forward(self, x):
        return self.second(self.first(x) * self.scale)


def test_named_params_follow_assignment_order() -> None:
    names = [n for n, _ in Tree().named_params()]
    assert names == ["scale", "first.weight", "second.weight"]
    assert [n for n, _ in Tree().named_buffers()] == ["first.running", "second.running"]


def test_named_params_are_stable_across_processes() -> None:
    code = (
        "import sys; sys.path.insert(0, '.');"
        "from tests.nn.test_module import Tree;"
        "print(','.join(n for n, _ in Tree().named_params()))"
    )
    out = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout for _ in range(2)}  # fmt: skip
    assert out == {"scale,first.weight,second.weight\n"}


def test_version_counter_bumps_on_assignment() -> None:
    tree = Tree()
    before = tree.version
    tree.extra = Leaf()
    assert tree.version == before + 1
    first = tree.first.version
    tree.first.weight = Parameter(np.zeros(2, np.float32))
    assert tree.first.version == first + 1
    del tree.extra
    assert tree.version == before + 2
    assert "extra" not in dict(tree.named_children())


def test_train_eval_propagate() -> None:
    tree = Tree().eval()
    assert not any(m.training for m in tree.modules())
    tree.train()
    assert all(m.training for m in tree.modules())


def test_reassigning_a_parameter_with_a_plain_value_unregisters_it() -> None:
    leaf = Leaf()
    leaf.weight = None
    assert [n for n, _ in leaf.named_params()] == []


def test_state_dict_round_trip_and_strict_errors() -> None:
    a, b = Tree(), Tree()
    for p in a.params():
        p.array[...] = np.random.default_rng(0).normal(size=p.shape)
    b.load_state_dict({k: v.numpy().copy() for k, v in a.state_dict().items()})
    for (na, pa), (nb, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert na == nb
        np.testing.assert_array_equal(pa.numpy(), pb.numpy())
    state = a.state_dict()
    state.pop("scale")
    state["bogus"] = np.zeros(1)
    with pytest.raises(
        ShapeError,
        match=r"(?s)Missing key\(s\) in state_dict: \['scale'\].*Unexpected key\(s\) in "
        r"state_dict: \['bogus'\]",
    ):
        b.load_state_dict(state)
    assert b.load_state_dict(state, strict=False) == (["scale"], ["bogus"])  # reported only


def test_load_state_dict_shape_mismatch_changes_nothing() -> None:
    tree = Tree()
    before = {k: v.numpy().copy() for k, v in tree.state_dict().items()}
    bad = {k: v.numpy() + 1 for k, v in tree.state_dict().items()}
    bad["second.weight"] = np.zeros(5, np.float32)
    with pytest.raises(
        ShapeError,
        match=r"size mismatch for second.weight: copying a param with shape \(5,\) "
        r"from checkpoint, the shape in current model is \(3,\)",
    ):
        tree.load_state_dict(bad)
    for k, v in tree.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_zero_grad_and_forward() -> None:
    with pytest.raises(ShapeError, match=r"(?s)multiply: shapes \(2,\), \(3,\).*test_module.py:23"):
        Tree()(dualflow.tensor(np.ones(2, np.float32)))  # the error names Leaf.forward's line
    leaf = Leaf()
    leaf(dualflow.tensor([1.0, 2.0])).sum().backward()
    assert leaf.weight.grad.tolist() == [1.0, 2.0]
    leaf.zero_grad()
    assert leaf.weight.grad is None


def test_assignment_before_init_is_a_clear_error() -> None:
    class Broken(Module):
        def __init__(self) -> None:
            self.w = 1

    with pytest.raises(AttributeError, match="super"):
        Broken()


def test_reassigning_keeps_registration_order() -> None:
    tree = Tree()
    tree.scale = Parameter(np.zeros(1, np.float32))
    tree.first = Leaf()
    assert [n for n, _ in tree.named_params()] == ["scale", "first.weight", "second.weight"]

"""dualflow.nn.init: PyTorch's gain table and fan rules, fill statistics, seeded reproducibility."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualflow
from dualflow.nn import Parameter, init
from dualflow.tensor.random import Generator


def param(*shape: int, dtype: str = "float32") -> Parameter:
    return Parameter(np.zeros(shape, dtype))


@pytest.mark.parametrize(
    ("name", "arg", "expected"),
    [
        ("linear", None, 1.0),
        ("conv2d", None, 1.0),
        ("conv_transpose2d", None, 1.0),
        ("sigmoid", None, 1.0),
        ("tanh", None, 5.0 / 3),
        ("relu", None, math.sqrt(2.0)),
        ("leaky_relu", None, math.sqrt(2.0 / (1 + 0.01**2))),
        ("leaky_relu", 0.2, math.sqrt(2.0 / 1.04)),
        ("leaky_relu", math.sqrt(5), math.sqrt(2.0 / 6)),
        ("selu", None, 0.75),
    ],
)
def test_calculate_gain_table(name: str, arg: float | None, expected: float) -> None:
    assert init.calculate_gain(name, arg) == pytest.approx(expected)


def test_calculate_gain_rejects_unknown() -> None:
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="negative_slope"):
        init.calculate_gain("leaky_relu", True)


def test_fan_in_and_fan_out() -> None:
    assert init.fan_in_and_fan_out(param(5, 3)) == (3, 5)
    assert init.fan_in_and_fan_out(param(8, 4, 3, 2)) == (24, 48)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.fan_in_and_fan_out(param(5))


def test_constant_zeros_ones_fill_in_place_and_return_the_tensor() -> None:
    p = param(2, 3)
    assert init.constant_(p, 0.25) is p
    np.testing.assert_array_equal(p.numpy(), np.full((2, 3), 0.25, np.float32))
    init.ones_(p)
    assert (p.numpy() == 1).all()
    init.zeros_(p)
    assert (p.numpy() == 0).all()
    assert p.requires_grad and p.is_leaf and p.grad is None


def test_init_is_not_recorded_by_autograd() -> None:
    p = param(3, 4)
    init.kaiming_uniform_(p)
    assert p.is_leaf and p.creator is None


def test_uniform_and_normal_statistics() -> None:
    g = Generator(3)
    u = init.uniform_(param(200, 100), -2.0, 3.0, generator=g).numpy()
    assert u.min() >= -2.0 and u.max() < 3.0
    assert u.mean() == pytest.approx(0.5, abs=0.03)
    assert u.var() == pytest.approx(25 / 12, rel=0.03)
    z = init.normal_(param(200, 100), 1.5, 0.5, generator=g).numpy()
    assert z.mean() == pytest.approx(1.5, abs=0.01)
    assert z.std() == pytest.approx(0.5, rel=0.02)


@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
@pytest.mark.parametrize("nonlinearity", ["relu", "leaky_relu", "tanh"])
def test_kaiming_std_follows_the_formula(mode: str, nonlinearity: str) -> None:
    shape = (256, 64, 3, 3)
    fan = 64 * 9 if mode == "fan_in" else 256 * 9
    std = init.calculate_gain(nonlinearity, 0.1) / math.sqrt(fan)
    g = Generator(0)
    w = init.kaiming_normal_(param(*shape), 0.1, mode, nonlinearity, generator=g).numpy()
    assert w.std() == pytest.approx(std, rel=0.02)
    assert abs(w.mean()) < 0.05 * std
    u = init.kaiming_uniform_(param(*shape), 0.1, mode, nonlinearity, generator=g).numpy()
    bound = math.sqrt(3.0) * std
    assert np.abs(u).max() <= bound
    assert np.abs(u).max() > 0.99 * bound  # fills the whole interval
    assert u.std() == pytest.approx(std, rel=0.02)


def test_kaiming_rejects_a_bad_mode() -> None:
    with pytest.raises(ValueError, match="fan_avg"):
        init.kaiming_uniform_(param(3, 3), mode="fan_avg")


def test_xavier_and_lecun_statistics() -> None:
    g = Generator(1)
    fan_in, fan_out = 300, 500
    std = 2.0 * math.sqrt(2.0 / (fan_in + fan_out))
    w = init.xavier_normal_(param(fan_out, fan_in), gain=2.0, generator=g).numpy()
    assert w.std() == pytest.approx(std, rel=0.02)
    u = init.xavier_uniform_(param(fan_out, fan_in), gain=2.0, generator=g).numpy()
    assert np.abs(u).max() <= math.sqrt(3.0) * std
    assert u.std() == pytest.approx(std, rel=0.02)
    lecun = init.lecun_normal_(param(fan_out, fan_in), generator=g).numpy()
    assert lecun.std() == pytest.approx(1 / math.sqrt(fan_in), rel=0.02)


def test_float64_tensors_keep_their_dtype() -> None:
    p = init.normal_(param(4, 4, dtype="float64"))
    assert p.dtype == np.float64 and p.numpy().std() > 0


def test_zero_element_tensors_are_a_no_op() -> None:
    p = param(0, 3)
    assert init.kaiming_uniform_(p) is p
    assert init.normal_(p) is p


def test_explicit_generator_is_reproducible_and_independent_of_the_default() -> None:
    a = init.kaiming_uniform_(param(4, 5), generator=Generator(7)).numpy().copy()
    dualflow.random.seed(123)
    b = init.kaiming_uniform_(param(4, 5), generator=Generator(7)).numpy()
    np.testing.assert_array_equal(a, b)
    c = init.kaiming_uniform_(param(4, 5), generator=Generator(8)).numpy()
    assert not np.array_equal(a, c)


def test_default_generator_follows_dualflow_random_seed() -> None:
    dualflow.random.seed(5)
    first = [init.normal_(param(3, 3)).numpy().copy() for _ in range(2)]
    dualflow.random.seed(5)
    second = [init.normal_(param(3, 3)).numpy().copy() for _ in range(2)]
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert not np.array_equal(first[0], first[1])  # the generator advances between calls


def test_linear_default_bounds() -> None:
    w, b = param(64, 25), param(64)
    init.linear_default_(w, b, generator=Generator(0))
    bound = 1 / 5
    assert np.abs(w.numpy()).max() <= bound and np.abs(w.numpy()).max() > 0.95 * bound
    assert np.abs(b.numpy()).max() <= bound
    # kaiming_uniform(a=√5) is U(±1/√fan_in): its std is bound/√3.
    assert w.numpy().std() == pytest.approx(bound / math.sqrt(3), rel=0.05)

"""``dualflow.gradcheck``: the public name of the gradient checks defined in the autograd layer."""

from dualflow.autograd.gradcheck import check_backward, check_double_backward, numerical_grad

__all__ = ["check_backward", "check_double_backward", "numerical_grad"]

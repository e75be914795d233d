"""The Tensor and what makes one: the class, its PyTorch-named methods, the tape node that records
where it came from, factories, device transfer, random generation, sparse and complex layouts.

Import its modules with ``from dualflow.tensor.core import Tensor`` (not ``import
dualflow.tensor.core``): the attribute ``dualflow.tensor`` is PyTorch's function ``tensor(data)``.
"""

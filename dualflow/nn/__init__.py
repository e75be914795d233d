"""Neural-network building blocks: Module, Parameter, layers and initializers."""

from dualflow.nn.module import Module
from dualflow.nn.parameter import Parameter

__all__ = ["Module", "Parameter"]

"""Containers: ``Sequential`` (modules applied in order) and ``ModuleList`` (an indexable list).

Children are registered under the names "0", "1", ... as in PyTorch, so state-dict keys look like
``features.0.weight``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

from dualflow.nn.module import Module


def _index(idx: int, n: int) -> int:
    idx = int(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a container of {n} modules")
    return idx % n


def _register_all(container: Module, items: list[tuple[str, Module]]) -> None:
    # Re-register every child: Module.__setattr__ appends a replaced child at the end, and a
    # container must keep its order (and ModuleList its "0".."n-1" names) after an edit.
    for name in list(container._modules):
        delattr(container, name)
    for name, module in items:
        setattr(container, name, module)


def _check_module(module: Any) -> Module:
    if not isinstance(module, Module):
        raise TypeError(f"{type(module).__name__} is not a Module subclass")
    return module


class Sequential(Module):
    """Apply modules in order: ``Sequential(a, b)(x) == b(a(x))``.

    Also accepts one ``OrderedDict`` of name -> module. Indexing with an int gives a module, with
    a slice a new Sequential (keeping the names).

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Linear, ReLU
        >>> net = Sequential(Linear(4, 3), ReLU(), Linear(3, 2))
        >>> len(net), type(net[-1]).__name__, [n for n, _ in net.named_params()][:2]
        (3, 'Linear', ['0.weight', '0.bias'])
        >>> net(np.zeros((5, 4), np.float32)).shape
        (5, 2)
    """

    def __init__(self, *modules: Module | OrderedDict) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, module in modules[0].items():
                setattr(self, name, _check_module(module))
        else:
            for i, module in enumerate(modules):
                setattr(self, str(i), _check_module(module))

    def __getitem__(self, idx: int | slice) -> Any:
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return type(self)(OrderedDict(items[idx]))
        return items[_index(idx, len(items))][1]

    def __setitem__(self, idx: int, module: Module) -> None:
        items = list(self._modules.items())
        k = _index(idx, len(items))
        items[k] = (items[k][0], _check_module(module))
        _register_all(self, items)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end (named ``str(len(self))``); returns self."""
        setattr(self, str(len(self)), _check_module(module))
        return self

    def forward(self, x: Any) -> Any:
        """Feed ``x`` through every module in order."""
        for module in self._modules.values():
            x = module(x)
        return x


class ModuleList(Module):
    """A list of modules, registered (so their parameters are the container's) as "0", "1", ....

    Example:
        >>> from dualflow.nn import Linear
        >>> layers = ModuleList([Linear(2, 2)])
        >>> layers.append(Linear(2, 3)).extend([Linear(3, 1)])
        ModuleList(
          (0): Linear(in_features=2, out_features=2, bias=True)
          (1): Linear(in_features=2, out_features=3, bias=True)
          (2): Linear(in_features=3, out_features=1, bias=True)
        )
        >>> len(layers), layers[1].out_features, [m.in_features for m in layers]
        (3, 3, [2, 2, 3])
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx: int | slice) -> Any:
        modules = list(self._modules.values())
        if isinstance(idx, slice):
            return type(self)(modules[idx])
        return modules[_index(idx, len(modules))]

    def __setitem__(self, idx: int, module: Module) -> None:
        modules = list(self._modules.values())
        modules[_index(idx, len(modules))] = _check_module(module)
        _register_all(self, [(str(i), m) for i, m in enumerate(modules)])

    def __delitem__(self, idx: int | slice) -> None:
        modules = list(self._modules.values())
        del modules[idx if isinstance(idx, slice) else _index(idx, len(modules))]
        _register_all(self, [(str(i), m) for i, m in enumerate(modules)])

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end; returns self."""
        setattr(self, str(len(self)), _check_module(module))
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Append every module of ``modules``; returns self."""
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index`` (list semantics)."""
        modules = list(self._modules.values())
        modules.insert(index, _check_module(module))
        _register_all(self, [(str(i), m) for i, m in enumerate(modules)])

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward(); iterate over it instead")

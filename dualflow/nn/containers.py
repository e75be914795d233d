"""Containers: ``Sequential`` (modules applied in order), ``ModuleList``, ``ModuleDict``,
``ParameterList`` and ``ParameterDict`` (PyTorch's, registering what they hold).

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


class ModuleDict(Module):
    """An ordered dict of modules registered under their keys (``blocks.encoder.weight``...).

    Example:
        >>> from dualflow.nn import Linear, ReLU
        >>> heads = ModuleDict({"a": Linear(2, 3), "act": ReLU()})
        >>> heads["b"] = Linear(3, 1)
        >>> list(heads), "a" in heads, len(heads), [n for n, _ in heads.named_parameters()][-1]
        (['a', 'act', 'b'], True, 3, 'b.bias')
    """

    def __init__(self, modules: Any = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, _check_module(module))

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        """The keys, in insertion order."""
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        """The modules, in insertion order."""
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        """(key, module) pairs, in insertion order."""
        return self._modules.items()

    def pop(self, key: str) -> Module:
        """Remove ``key`` and return its module."""
        module = self._modules[key]
        del self[key]
        return module

    def clear(self) -> None:
        """Remove every module."""
        for key in list(self._modules):
            del self[key]

    def update(self, modules: Any) -> None:
        """Add (or replace) modules from a mapping or an iterable of (key, module) pairs."""
        pairs = modules.items() if hasattr(modules, "items") else modules
        for key, module in pairs:
            self[key] = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward(); index it instead")


class ParameterList(Module):
    """A list of parameters registered as "0", "1", ... (so optimizers and state dicts see them).

    Example:
        >>> import numpy as np
        >>> from dualflow.nn import Parameter
        >>> ps = ParameterList([Parameter(np.zeros(2)), Parameter(np.ones(1))])
        >>> len(ps), [n for n, _ in ps.named_parameters()], ps[1].tolist()
        (2, ['0', '1'], [1.0])
    """

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        for value in values or ():
            self.append(value)

    def __getitem__(self, idx: int) -> Any:
        return self._params[str(_index(idx, len(self)))]

    def __setitem__(self, idx: int, value: Any) -> None:
        setattr(self, str(_index(idx, len(self))), _as_parameter(value))

    def __len__(self) -> int:
        return len(self._params)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._params.values())

    def append(self, value: Any) -> ParameterList:
        """Add a parameter (a Tensor or array is wrapped in one); returns self."""
        setattr(self, str(len(self)), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        """Append every value; returns self."""
        for value in values:
            self.append(value)
        return self

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ParameterList has no forward(); index it instead")


class ParameterDict(Module):
    """An ordered dict of parameters registered under their keys.

    Example:
        >>> import numpy as np
        >>> pd = ParameterDict({"scale": np.ones(2, np.float32)})
        >>> list(pd), type(pd["scale"]).__name__
        (['scale'], 'Parameter')
    """

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        pairs = parameters.items() if hasattr(parameters, "items") else parameters or ()
        for key, value in pairs:
            self[key] = value

    def __getitem__(self, key: str) -> Any:
        return self._params[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.register_parameter(key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._params)

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __contains__(self, key: str) -> bool:
        return key in self._params

    def keys(self) -> Iterable[str]:
        """The keys, in insertion order."""
        return self._params.keys()

    def values(self) -> Iterable[Any]:
        """The parameters, in insertion order."""
        return self._params.values()

    def items(self) -> Iterable[tuple[str, Any]]:
        """(key, parameter) pairs, in insertion order."""
        return self._params.items()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ParameterDict has no forward(); index it instead")


def _as_parameter(value: Any) -> Any:
    from dualflow.nn.parameter import Parameter  # noqa: PLC0415 - parameter imports tensor only

    return value if isinstance(value, Parameter) or value is None else Parameter(value)

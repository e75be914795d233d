"""``Module``: the container of parameters, buffers and submodules, in assignment order.

Assigning a Parameter, a Module or (for registered names) a buffer Tensor registers it; every
attribute assignment and hook registration bumps the module's ``version`` so a compiled function
notices structural changes. Names are dotted paths (``layer1.0.conv.weight``), as PyTorch's.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from dualflow._undo import current as undo_current
from dualflow.nn import hooks, module_state
from dualflow.nn.missing import MissingAttribute
from dualflow.nn.module_state import fail_closed
from dualflow.nn.parameter import Parameter
from dualflow.ops.dispatch import tracing
from dualflow.tensor.core import Tensor


class Module(hooks.HookMethods, module_state.ConversionMethods):
    """Base class of layers and models; subclasses define ``forward``.

    Example:
        >>> import numpy as np
        >>> class Affine(Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = Parameter(np.ones((2,), np.float32))
        ...     def forward(self, x):
        ...         return x * self.w
        >>> [name for name, _ in Affine().named_parameters()]
        ['w']
    """

    _versioned = True  # ``_version`` counts assignments: compiled steps guard it (tracer)

    def __init__(self) -> None:
        for table in ("_params", "_buffers", "_modules"):
            object.__setattr__(self, table, OrderedDict())
        object.__setattr__(self, "_parameters", self._params)  # PyTorch's name, same dict
        object.__setattr__(self, "_non_persistent", set())
        for table in hooks.HOOK_TABLES:
            object.__setattr__(self, table, OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_version", 0)

    # ----- registration --------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if "_params" not in self.__dict__:
            raise AttributeError(f"call super().__init__() before assigning {name!r}")
        tracer = tracing()
        if tracer is not None:  # fails closed: the graph cannot replay Python state
            tracer.on_module_write(self, name, value)
        if isinstance(value, Parameter):
            home = self._params
        elif isinstance(value, Module):
            home = self._modules
        elif name in self._params:
            if value is not None:
                raise TypeError(
                    f"cannot assign {type(value).__name__} as parameter {name!r} (a Parameter "
                    "or None is expected); wrap it: nn.Parameter(value)"
                )
            home = self._params
        elif name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign {type(value).__name__} as buffer {name!r} (a Tensor or None "
                    "is expected)"
                )
            home = self._buffers
        else:
            home = None
        for table in (self._params, self._buffers, self._modules):
            if table is not home and name in table:
                del table[name]
        if home is None:
            object.__setattr__(self, name, value)
        else:
            home[name] = value  # a re-assigned name keeps its place in the order (as PyTorch)
        self._bump()

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: parameters, buffers and submodules live here.
        for table in ("_params", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                tracer = tracing()
                if tracer is not None:  # the trace depends on this module's structure
                    tracer.on_module_read(self)
                return entries[name]
        if name.startswith("__"):
            raise AttributeError(name)
        raise MissingAttribute(self, name)

    def __delattr__(self, name: str) -> None:
        fail_closed(f"deleting {type(self).__name__}.{name}")
        for table in (self._params, self._buffers, self._modules):
            if name in table:
                del table[name]
                break
        else:
            object.__delattr__(self, name)
        self._non_persistent.discard(name)
        self._bump()

    def _bump(self) -> None:
        object.__setattr__(self, "_version", self._version + 1)

    def _check_new_name(self, name: Any, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f"{kind} name can't be empty or contain '.', got {name!r}")
        known = name in self._params or name in self._buffers or name in self._modules
        if (name in self.__dict__ or hasattr(type(self), name)) and not known:
            raise KeyError(f"attribute {name!r} already exists")

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register non-trainable state (running statistics...) under ``name``.

        Persistent buffers are saved in ``state_dict()``; others are not (as PyTorch).

        Example:
            >>> import dualflow
            >>> m = Module(); m.register_buffer("count", dualflow.tensor(0), persistent=False)
            >>> list(m.state_dict()), int(m.count)
            ([], 0)
        """
        fail_closed(f"register_buffer({name!r})")
        self._check_new_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign {type(tensor).__name__} as buffer {name!r}")
        for table in (self._params, self._modules):
            table.pop(name, None)
        self._buffers[name] = tensor
        (self._non_persistent.discard if persistent else self._non_persistent.add)(name)
        self._bump()

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` (or None: a declared but absent parameter) under ``name``.

        Example:
            >>> m = Module(); m.register_parameter("bias", None)
            >>> m.bias is None, list(m.parameters())
            (True, [])
        """
        fail_closed(f"register_parameter({name!r})")
        self._check_new_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__} as parameter {name!r}")
        for table in (self._buffers, self._modules):
            table.pop(name, None)
        self._params[name] = param
        self._bump()

    def add_module(self, name: str, module: Module | None) -> None:
        """Register a submodule (or None) under ``name``; ``register_module`` is the same.

        Example:
            >>> from dualflow.nn import Linear
            >>> m = Module(); m.add_module("fc", Linear(2, 1)); [n for n, _ in m.named_children()]
            ['fc']
        """
        fail_closed(f"add_module({name!r})")
        self._check_new_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        for table in (self._params, self._buffers):
            table.pop(name, None)
        self._modules[name] = module
        self._bump()

    register_module = add_module

    @property
    def version(self) -> int:
        """Counter bumped by every attribute assignment on this module."""
        return self._version

    # ----- traversal -------------------------------------------------------------------------
    def named_modules(
        self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """This module and every submodule, depth first, with dotted names (each once)."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                path = f"{prefix}.{name}" if prefix else name
                yield from child.named_modules(memo, path, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        """This module and every submodule (each once)."""
        return (m for _, m in self.named_modules())

    def children(self) -> Iterator[Module]:
        """The direct submodules (each once)."""
        return (m for _, m in self.named_children())

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """The direct submodules with their names (each once)."""
        seen: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def _named_members(
        self, table: str, prefix: str, recurse: bool, remove_duplicate: bool
    ) -> Iterator[tuple[str, Any]]:
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        seen: set[int] = set()
        for path, module in modules:
            for name, t in getattr(module, table).items():
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                yield (f"{path}.{name}" if path else name), t

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """Every parameter with its dotted name, in registration order (shared ones once)."""
        return self._named_members("_params", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter (shared ones once); ``recurse=False``: this module's own."""
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """Every buffer with its dotted name (persistent or not)."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Every buffer (shared ones once)."""
        return (b for _, b in self.named_buffers(recurse=recurse))

    def named_params(self) -> Iterator[tuple[str, Parameter]]:
        """``named_parameters()`` (dualflow's original name, kept)."""
        return self.named_parameters()

    def params(self) -> Iterator[Parameter]:
        """``parameters()`` (dualflow's original name, kept)."""
        return self.parameters()

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path ``target`` (``""``: this module)."""
        module = self
        for part in target.split(".") if target else ():
            child = module._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(module).__name__} has no submodule {part!r}")
            module = child
        return module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target``."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if module._params.get(name) is None:
            raise AttributeError(f"{type(module).__name__} has no parameter {name!r}")
        return module._params[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target``."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if module._buffers.get(name) is None:
            raise AttributeError(f"{type(module).__name__} has no buffer {name!r}")
        return module._buffers[name]

    # ----- modes, grads, devices ---------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode here and in every submodule (dropout, batch norm read it)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        modules = list(self.modules())
        tracer = tracing()
        if tracer is not None:  # a compiled call: replayed by its plan runs (module_reads)
            tracer.on_train_mode(modules, mode)
        log = undo_current()
        if log is not None:  # an all-or-nothing eager call (dualflow._undo)
            log.modes(modules)
        for module in modules:  # compiled callers check the flag with the version
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        """Inference mode: dropout off, batch norm uses running statistics."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set ``requires_grad`` of every parameter (freeze with False); returns self."""
        fail_closed("Module.requires_grad_()")
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear ``.grad`` of every parameter (to None, or to zeros with ``set_to_none=False``)."""
        module_state.zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every submodule (children first) and then on this module; returns self.

        Example:
            >>> from dualflow.nn import Linear, Sequential, init
            >>> net = Sequential(Linear(2, 2), Linear(2, 1))
            >>> _ = net.apply(lambda m: init.zeros_(m.bias) if isinstance(m, Linear) else None)
            >>> net[1].bias.tolist()
            [0.0]
        """
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ----- state ---------------------------------------------------------------------------------
    def state_dict(
        self, *args: Any, destination: Any = None, prefix: str = "", keep_vars: bool = False
    ) -> dict[str, Tensor]:
        """Parameters and persistent buffers by dotted name, module by module (PyTorch's order).

        A tensor reachable under two names (tied weights) appears under both, as in PyTorch.
        Values share memory with the module's tensors (detached unless ``keep_vars``).
        """
        if args:  # PyTorch's deprecated positional form: (destination, prefix, keep_vars)
            destination, prefix, keep_vars = (*args, None, prefix, keep_vars)[:3]
        result = OrderedDict() if destination is None else destination
        for key, t in module_state.state_items(self, prefix):
            result[key] = t if keep_vars else t.detach()
        return result

    def load_state_dict(
        self, state_dict: Any, strict: bool = True, assign: bool = False
    ) -> module_state.IncompatibleKeys:
        """Copy values into this module's tensors by name; nothing changes if a check fails.

        ``strict`` requires the key sets to match exactly; shapes must always match. A tensor
        shared under several keys is written once. Returns ``(missing_keys, unexpected_keys)``.
        """
        fail_closed("Module.load_state_dict()")
        if assign:
            raise ValueError("load_state_dict(assign=True) is not supported; values are copied")
        return module_state.load(self, state_dict, strict)

    # ----- calling -----------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tracer = tracing()
        if tracer is not None:  # modules without parameters matter too (Dropout.p)
            tracer.on_module_read(self)
        if hooks.any_hooks(self):
            return hooks.call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in self._modules.items():
            if child is not None:
                lines.append(f"  ({name}): " + repr(child).replace("\n", "\n  "))
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"

    def __dir__(self) -> list[str]:
        extra = [*self._params, *self._buffers, *self._modules]
        return sorted(set(super().__dir__()) | set(extra))

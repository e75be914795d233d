"""``Optimizer``: the base of every update rule: param groups, per-parameter state, state dicts.

Subclasses write one ``_update`` with dualflow ops; ``step()`` runs it under ``no_grad()`` and every
write to a parameter or a state tensor goes through ``ops.assign``, so a tracer captures the whole
update as graph state writes (DESIGN §3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from dualflow import arguments, ops
from dualflow._config import enable_grad, no_grad
from dualflow._undo import current as undo_current
from dualflow.device import get_array_module
from dualflow.errors import ShapeError
from dualflow.ops.dispatch import tracing
from dualflow.optim.param_group import ParamGroup
from dualflow.optim.param_group import as_float as _as_float
from dualflow.optim.state_check import check_same_kind
from dualflow.optim.state_tensors import step_counter, zeros_like
from dualflow.serialization import check_cast
from dualflow.tensor.core import Tensor

__all__ = ["Optimizer", "ParamGroup", "step_counter", "zeros_like"]  # helpers re-exported

# PyTorch Optimizer names dualflow does not have -> what to use instead.
_INSTEAD = {
    "register_step_pre_hook": "optimizer hooks are not supported: run the code before step()",
    "register_step_post_hook": "optimizer hooks are not supported: run the code after step()",
    "register_state_dict_pre_hook": "optimizer hooks are not supported: edit the dict",
    "register_state_dict_post_hook": "optimizer hooks are not supported: edit the dict",
    "register_load_state_dict_pre_hook": "optimizer hooks are not supported: edit the dict",
    "register_load_state_dict_post_hook": "optimizer hooks are not supported: edit the dict",
    "share_memory": "for multi-process training use dualflow.distributed",
}


class Optimizer:
    """Base class: holds ``param_groups`` (dicts of params and hyperparameters) and ``state``.

    Each group's ``lr`` is a 0-d Tensor (float32, or float64 when the group holds a float64
    parameter) created once and updated in place, so a compiled step reads it by reference and an
    lr scheduler changes it without a retrace. Assigning a Python float to ``group["lr"]`` works
    too: the next ``step()`` copies it into the group's tensor. Other hyperparameters are plain
    Python values, read at every step (a compiled step bakes them into its graph).

    Example:
        >>> import numpy as np
        >>> import dualflow
        >>> from dualflow.nn import Parameter
        >>> from dualflow.optim import SGD
        >>> p = Parameter(np.array([1.0, 2.0], np.float32))
        >>> opt = SGD([p], lr=0.5)
        >>> p.grad = dualflow.tensor([1.0, 1.0]); opt.step(); p.tolist()
        [0.5, 1.5]
    """

    _versioned = True  # ``_version`` counts changes: compiled steps guard it (tracer)

    # (hyperparameter, low, high): a finite number in [low, high], None meaning unbounded (see
    # _check_hyperparameters); lr and betas are checked for every optimizer
    _ranges: tuple[tuple[str, float | None, float | None], ...] = ()

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        if isinstance(params, Tensor | dict):
            raise TypeError(
                "optimizer params must be an iterable of Tensors or of param-group dicts, "
                f"got a {type(params).__name__}; wrap it in a list, e.g. SGD([p], lr=0.1)"
            )
        self.defaults = dict(defaults)
        self._version = 0  # bumped by any change a compiled step must retrace for
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[Tensor, dict[str, Tensor]] = {}
        self._lr_tensors: list[Tensor] = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # ----- groups ------------------------------------------------------------------------------
    def add_param_group(self, group: dict[str, Any]) -> None:
        """Add a group of parameters; hyperparameters it does not set come from the defaults.

        Example:
            >>> import numpy as np
            >>> from dualflow.nn import Parameter
            >>> from dualflow.optim import SGD
            >>> opt = SGD([Parameter(np.zeros(2))], lr=0.1)
            >>> opt.add_param_group({"params": [Parameter(np.zeros(3))], "lr": 0.01})
            >>> [round(float(g["lr"]), 6) for g in opt.param_groups]
            [0.1, 0.01]
        """
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError("a param group must be a dict with a 'params' entry")
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        self._check_params(params)
        new = {**self.defaults, **{k: v for k, v in group.items() if k != "params"}}
        new["params"] = params
        self._check_hyperparameters(new)
        lr_dtype = np.float64 if any(p.dtype == np.float64 for p in params) else np.float32
        xp = get_array_module(params[0].array)
        lr = Tensor(xp.asarray(_as_float(new["lr"]), dtype=lr_dtype))
        suffix = f"[{len(self.param_groups)}]" if self.param_groups else ""
        lr.name = f"{type(self).__name__.lower()}.lr{suffix}"
        new["lr"] = lr
        self.param_groups.append(ParamGroup(self, new))
        self._lr_tensors.append(lr)
        self._version += 1

    def _check_params(self, params: list[Any]) -> None:
        if not params:
            raise ValueError("a param group needs at least one parameter")
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("optimizer can't optimize a non-leaf tensor; pass parameters")
            if id(p) in seen:
                raise ValueError("a parameter appears more than once in the optimizer's groups")
            seen.add(id(p))

    def _check_hyperparameters(self, group: dict[str, Any]) -> None:
        """Raise ArgumentError (a ValueError) naming a hyperparameter that is not a finite
        number in its range: ``lr``, ``betas`` and the class's ``_ranges``."""
        name = type(self).__name__
        arguments.real(name, "lr", group["lr"], 0.0, what="the learning rate")
        if "betas" in group:
            arguments.reals(name, "betas", group["betas"], 2, low=0.0, high=1.0, open_high=True)
        for key, low, high in self._ranges:
            arguments.real(name, key, group[key], low, high)

    def lr_tensor(self, index: int) -> Tensor:
        """The 0-d lr tensor of group ``index``, first syncing a value the user assigned.

        Example:
            >>> import numpy as np
            >>> from dualflow.nn import Parameter
            >>> from dualflow.optim import SGD
            >>> opt = SGD([Parameter(np.zeros(2, np.float32))], lr=0.1)
            >>> lr = opt.lr_tensor(0)
            >>> opt.param_groups[0]["lr"] = 0.5
            >>> opt.lr_tensor(0) is lr, lr.item()
            (True, 0.5)
        """
        group, lr = self.param_groups[index], self._lr_tensors[index]
        value = group["lr"]
        if value is not lr:
            with no_grad():
                ops.assign(lr, value)
            dict.__setitem__(group, "lr", lr)  # bookkeeping, not a user change: no version bump
        return lr

    # ----- stepping ----------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a ``.grad``; returns ``closure()`` if given.

        ``closure`` (re-evaluates the model and returns the loss) runs with grad enabled first.

        Example:
            >>> import numpy as np
            >>> from dualflow.nn import Parameter
            >>> from dualflow.optim import SGD
            >>> p = Parameter(np.array([3.0], np.float32))
            >>> opt = SGD([p], lr=0.25)
            >>> def closure():
            ...     opt.zero_grad(); loss = (p * p).sum(); loss.backward(); return loss
            >>> opt.step(closure).item(), p.tolist()
            (9.0, [1.5])
        """
        tracer = tracing()
        if tracer is not None:  # a compiled step depends on the hyperparameters
            tracer.on_module_read(self)
        log = undo_current()
        if log is not None:  # an all-or-nothing eager call (dualflow._undo)
            log.restore_point(self)
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for index, group in enumerate(self.param_groups):
                lr = self.lr_tensor(index)
                for position, p in enumerate(group["params"]):
                    if p.grad is not None:
                        state = self.state.setdefault(p, {})
                        fresh = not state
                        self._update(p, p.grad, state, group, lr)
                        if fresh:  # graphs and explain show "sgd.momentum_buffer[3]", not "state7"
                            self._name_state(state, index, position)
        return loss

    def _rollback_point(self) -> Callable[[], None]:
        """A function putting the Python side of this optimizer back as it is now.

        A compiled call whose tracing run fails rolls back tensor writes itself; state *born*
        in the call (a first step's moment buffers, its step count) lives in these dicts.
        """
        entries = [(p, inner, dict(inner)) for p, inner in self.state.items()]
        groups = [(group, dict(group)) for group in self.param_groups]
        version = self._version

        def restore() -> None:
            self.state.clear()
            for p, inner, saved in entries:
                inner.clear()
                inner.update(saved)
                self.state[p] = inner
            for group, saved in groups:
                dict.clear(group)
                dict.update(group, saved)
            self._version = version

        return restore

    def _name_state(self, state: dict[str, Tensor], group: int, position: int) -> None:
        prefix = type(self).__name__.lower() + (f".group{group}" if group else "")
        for key, tensor in state.items():
            if tensor.name is None:
                tensor.name = f"{prefix}.{key}[{position}]"

    def _update(
        self, p: Tensor, grad: Tensor, state: dict[str, Tensor], group: dict, lr: Tensor
    ) -> None:
        """Write one parameter's update (and its state) with ``ops.assign``; runs under no_grad.

        ``lr`` is the group's 0-d lr tensor (cast it to ``p.dtype`` before touching arrays).
        """
        raise NotImplementedError(f"{type(self).__name__} must define _update()")

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Set ``.grad`` of every parameter to None (``set_to_none=False``: to zeros).

        Example:
            >>> import numpy as np
            >>> from dualflow.nn import Parameter
            >>> from dualflow.optim import SGD
            >>> p = Parameter(np.zeros(2)); p.grad = p * 1
            >>> SGD([p], lr=0.1).zero_grad(); p.grad is None
            True
        """
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none or p.grad is None:
                    p.grad = None
                else:  # a new zero tensor: a gradient array may be shared or read-only
                    with no_grad():
                        p.grad = ops.zeros_like(p.grad)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: name what to use instead of PyTorch's extras.
        if name.startswith("__") or name not in _INSTEAD:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}: {_INSTEAD[name]}")

    # ----- state dicts -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A snapshot: ``{"state": {position: {name: Tensor}}, "param_groups": [...]}``.

        Parameters are numbered by their position across the groups, as in PyTorch; state
        tensors are copies (later steps do not change a saved dict) and ``lr`` is a float.

        Example:
            >>> import numpy as np
            >>> from dualflow.nn import Parameter
            >>> from dualflow.optim import SGD
            >>> opt = SGD([Parameter(np.zeros(2))], lr=0.5, momentum=0.9)
            >>> opt.state_dict()["param_groups"][0]["params"], opt.state_dict()["state"]
            ([0], {})
        """
        positions: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k not in ("params", "lr")}
            packed["lr"] = _as_float(group["lr"])
            packed["params"] = [
                positions.setdefault(id(p), len(positions)) for p in group["params"]
            ]
            groups.append(packed)
        state = {
            positions[id(p)]: {k: Tensor(v.raw_array.copy()) for k, v in entries.items()}
            for p, entries in self.state.items()
            if entries and id(p) in positions
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyperparameters and per-parameter state saved by ``state_dict()``.

        Values are copied into the existing state tensors when shapes agree (their identity is
        kept, which a compiled step relies on), otherwise new tensors are created. Everything is
        checked before anything is written: a mismatched dict raises ValueError (ShapeError for
        a state tensor whose shape does not fit) and leaves the optimizer unchanged.

        Example:
            >>> import numpy as np
            >>> from dualflow.nn import Parameter
            >>> from dualflow.optim import SGD
            >>> opt = SGD([Parameter(np.zeros(2))], lr=0.5)
            >>> saved = opt.state_dict(); opt.param_groups[0]["lr"] = 0.1
            >>> opt.load_state_dict(saved); opt.lr_tensor(0).item()
            0.5
        """
        saved_groups, plan = self._plan_load(state_dict)
        self._version += 1  # state tensors may be replaced: compiled steps must retrace
        with no_grad():
            for index, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
                for key, value in saved.items():
                    if key == "params":
                        continue
                    if key == "lr":
                        ops.assign(self._lr_tensors[index], _as_float(value))
                        dict.__setitem__(group, "lr", self._lr_tensors[index])
                    else:
                        group.restore(key, value)  # also rewrites its mirror tensors
            for p, arrays in plan:
                self._restore_state(p, arrays)

    def _plan_load(self, state_dict: dict[str, Any]) -> tuple[list[dict], list[tuple]]:
        """Check ``state_dict`` against this optimizer; return its groups and (param, arrays)."""
        if not isinstance(state_dict, dict) or {"state", "param_groups"} - set(state_dict):
            raise ValueError("load_state_dict: expected a dict with 'state' and 'param_groups'")
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"load_state_dict: the saved state has {len(saved_groups)} param groups, "
                f"this optimizer has {len(self.param_groups)}"
            )
        check_same_kind(self, saved_groups)
        by_position: dict[int, Tensor] = {}
        for index, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(saved.get("params", ())) != len(group["params"]):
                raise ValueError(
                    f"load_state_dict: param group {index} has {len(saved['params'])} parameters "
                    f"in the saved state but {len(group['params'])} here"
                )
            by_position.update(zip((int(i) for i in saved["params"]), group["params"]))
            try:
                self._check_hyperparameters({**group, **saved})
            except ValueError as exc:
                raise ValueError(f"load_state_dict: param group {index}: {exc}") from None
        plan = []
        for position, entries in state_dict["state"].items():
            p = by_position.get(int(position))
            if p is None:
                raise ValueError(f"load_state_dict: state for unknown parameter {position!r}")
            plan.append((p, {k: self._checked_array(p, k, v) for k, v in entries.items()}))
        loaded = {id(p) for p, _ in plan}
        plan += [(p, None) for p in by_position.values() if id(p) not in loaded]
        return saved_groups, plan

    def _checked_array(self, p: Tensor, key: str, value: Any) -> Any:
        """A saved state value as a numpy array, checked to fit parameter ``p`` losslessly."""
        array = np.asarray(value.numpy() if isinstance(value, Tensor) else value)
        if array.shape not in ((), tuple(p.shape)):
            raise ShapeError(
                f"load_state_dict: state {key!r} has shape {array.shape} but its parameter has "
                f"shape {tuple(p.shape)}"
            )
        dtype = np.float64 if array.ndim == 0 else p.dtype  # as _restore_state makes them
        check_cast(array, dtype, f"{type(self).__name__}.load_state_dict: state {key!r}")
        return array

    def _restore_state(self, p: Tensor, arrays: dict[str, Any] | None) -> None:
        """Make ``p``'s state exactly ``arrays``, reusing existing tensors of the same shape."""
        if arrays is None:
            self.state.pop(p, None)
            return
        old = self.state.get(p, {})
        xp = get_array_module(p.array)
        new = {}
        for key, array in arrays.items():
            target = old.get(key)
            if target is None or target.shape != array.shape:
                dtype = np.float64 if array.ndim == 0 else p.dtype  # 0-d: counts such as step
                target = Tensor(xp.zeros(array.shape, dtype=dtype))
            ops.assign(target, xp.asarray(array))
            new[key] = target
        self.state[p] = new

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for index, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {index}")
            for key, value in sorted(group.items()):
                if key != "params":
                    shown = _as_float(value) if isinstance(value, Tensor) else value
                    lines.append(f"    {key}: {shown}")
        return "\n".join(lines) + "\n)"

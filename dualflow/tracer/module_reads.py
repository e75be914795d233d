"""What a trace depends on of Modules and Optimizers, and the mode changes it makes to them.

A trace records every versioned object it reads with its version and ``training`` flag, checked
before each plan run. ``model.train()`` / ``model.eval()`` inside the call are side effects: a
plan run sets the same flags again after it committed, and a module whose flag the call set
before anything read it does not depend on the flag it had before the call (issue 40: a step
that starts with ``model.train()`` no longer retraces after every ``model.eval()``).
"""

from __future__ import annotations

from typing import Any

ANY_MODE: Any = type("AnyMode", (), {"__repr__": lambda self: "<any mode>"})()


class ModuleReads:
    """The versioned objects one tracing run read, and the training flags it wrote."""

    def __init__(
        self, checks: Any, restores: list, names: dict, builder: Any, flag_read: set[int]
    ) -> None:
        self.checks, self.restores, self.names, self.builder = checks, restores, names, builder
        self.seen: dict[int, Any] = {}  # id -> the object (kept alive: ids stay unique)
        self.read_at: dict[int, int] = {}  # id -> the graph's last value id when first read
        self.flag_read = flag_read  # modules whose `training` the user's code read (the probe)
        self.written: dict[int, tuple[Any, bool]] = {}  # id -> (module, the flag it ends with)

    def read(self, module: Any) -> None:
        """Record a versioned object the trace depends on (once)."""
        if id(module) in self.seen:
            return
        self.seen[id(module)] = module
        self.read_at[id(module)] = self.builder.last_id
        flag = ANY_MODE if id(module) in self.written else getattr(module, "training", None)
        self.checks.modules.append((module, module._version, flag))
        snapshot = getattr(module, "_rollback_point", None)
        if snapshot is not None:  # an optimizer: its state dicts change in Python, not tensors
            self.restores.append(snapshot())
        if hasattr(module, "named_params") and hasattr(module, "named_buffers"):
            for name, tensor in (*module.named_params(), *module.named_buffers()):
                self.names.setdefault(id(tensor), name)

    def set_mode(self, modules: list[Any], mode: bool) -> None:
        """``train(mode)`` is about to set ``training`` on ``modules``: undo it if the trace
        fails, replay it after each plan run, and stop depending on the flag before it where
        nothing (no op, no read of ``training``) could have used that flag yet."""
        before = [(m, getattr(m, "training", None)) for m in modules]
        self.restores.append(lambda: [object.__setattr__(m, "training", f) for m, f in before])
        for module in modules:
            self.written[id(module)] = (module, mode)
            if self._unused_since_read(module):
                self._forget_flag(module)

    def _unused_since_read(self, module: Any) -> bool:
        key = id(module)
        if key not in self.seen:
            return False
        return key not in self.flag_read and self.read_at[key] == self.builder.last_id

    def _forget_flag(self, module: Any) -> None:
        entries = self.checks.modules
        for i, (held, version, _) in enumerate(entries):
            if held is module:
                entries[i] = (held, version, ANY_MODE)

    def replay_actions(self) -> list[tuple[str, Any, Any, Any]]:
        """The mode writes as replay actions (the final flag of every module written)."""
        return [("mode", module, None, ("same", flag)) for module, flag in self.written.values()]

"""What one step of issue 35's grammar of environment access paths is (``env_steps`` lists them).

A step is an expression template (``@`` stands for the object it reads from), the kind of object
it reads from (``makes``: a tag), what it reads out of it (``needs``: ``"any"``, one tag,
``"weak"``: weak-referenceable, ``"data"``: anything but a function, ``"notdc"``: anything but
a dataclass or a defaultdict), how to build that object around a given inner value, how to
replace the inner value in place (``put``; ``None`` for immutable holders such as tuples and
strings), and the module-level helper functions its expression calls, if any (``defs``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WEAK = frozenset({"obj", "dc", "cls", "array", "call", "partial"})  # what weakref.ref accepts


@dataclass(frozen=True)
class Step:
    """One level of an access path (see the module docstring)."""

    name: str
    expr: str
    makes: str
    needs: str
    build: Callable[[Any], Any]
    put: Callable[[Any, Any], None] | None
    defs: str = ""  # module-level source the expression calls (statements: match, try, with)

    def read(self, inner: str) -> str:
        """The expression reading this level out of the expression ``inner``.

        Example:
            >>> Step("max_key", "max(@, key=len)", "list", "any", list, None).read("CFG")
            'max(CFG, key=len)'
        """
        return self.expr.replace("@", inner)

    def accepts(self, tag: str) -> bool:
        """Whether the value this step reads may be of kind ``tag``."""
        if self.needs == "data":  # a class attribute read through an instance binds a function
            return tag != "call"
        if self.needs == "notdc":  # asdict turns a dataclass inside into a dict and cannot
            return tag not in ("dc", "ddict")  # rebuild a defaultdict (no default factory)
        return self.needs in ("any", tag) or (self.needs == "weak" and tag in WEAK)

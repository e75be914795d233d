"""Steps of issue 35's grammar that read through Python syntax rather than a library: ``match``
statements (mapping and class patterns), ``try``/``except``, ``with``, a generator function,
slicing, ``**`` and ``*`` unpacking, ``eval``. Statement forms live in module-level helper
functions of the generated module (``Step.defs``).
"""

from __future__ import annotations

from typing import Any

from tests.tracer.fuzz import env_helpers as lib
from tests.tracer.fuzz.env_step import Step


def _attr(obj: Any, new: Any) -> None:
    obj.val = new


def _item(d: Any, new: Any) -> None:
    d["val"] = new


def _first(items: list, new: Any) -> None:
    items[0] = new


def _second(items: list, new: Any) -> None:
    items[1] = new


def _dict(inner: Any) -> dict:
    return {"val": inner, "other": 0}


_MATCH_MAPPING = """\
def _match_mapping(c):
    match c:
        case {'val': w}:
            return w
"""
_MATCH_CLASS = """\
def _match_class(c):
    match c:
        case lib.Box(val=w):
            return w
"""
_TRY = """\
def _try_get(c):
    try:
        return c['val']
    except KeyError:
        return 0.0
"""
_WITH = """\
def _with(c):
    with contextlib.nullcontext(c) as d:
        return d['val']
"""
_GENERATOR = """\
def _values(c):
    yield from c.values()
"""
SYNTAX = [
    Step("match_mapping", "_match_mapping(@)", "dict", "any", _dict, _item, _MATCH_MAPPING),
    Step("match_class", "_match_class(@)", "obj", "any", lib.Box, _attr, _MATCH_CLASS),
    Step("try_except", "_try_get(@)", "dict", "any", _dict, _item, _TRY),
    Step("with", "_with(@)", "dict", "any", _dict, _item, _WITH),
    Step("generator", "next(_values(@))", "dict", "any", _dict, _item, _GENERATOR),
    Step("slice", "@[1:][0]", "list", "any", lambda v: [0, v], _second),
    Step("dict_merge", "{**@}['val']", "dict", "any", _dict, _item),
    Step("star_max", "max(*@)", "list", "num", lambda v: [v, -1.0], _first),
    Step("eval", "eval('c[1]', {'c': @})", "list", "any", lambda v: [0, v], _second),
]

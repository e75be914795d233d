"""More steps of issue 35's grammar (see ``env_steps`` for what a step is): user classes with
``__getitem__``/``__getattr__``/``__slots__``/classmethods, namedtuples, ``collections``
mappings, iterator builtins (``map``, ``filter``, ``enumerate``, ``reversed``, ``itertools``),
and numbers out of strings, bytes, ``array.array``, numpy scalars, ``math``/``statistics``.
"""

from __future__ import annotations

import array
import collections
from typing import Any

import numpy as np

from tests.tracer.fuzz import env_helpers as lib
from tests.tracer.fuzz.env_step import Step


def _attr(obj: Any, new: Any) -> None:
    obj.val = new


def _type(obj: Any, new: Any) -> None:
    type(obj).val = new


def _item(d: Any, new: Any) -> None:
    d["val"] = new


def _inner_dict(obj: Any, new: Any) -> None:
    obj._d["val"] = new


def _ranked(items: list, new: Any) -> None:
    items[1].val = new


def _first(items: Any, new: Any) -> None:
    items[0] = new


def _second(items: list, new: Any) -> None:
    items[1] = new


def _dict(inner: Any) -> dict:
    return {"val": inner, "other": 0}


def _defaultdict(inner: Any) -> collections.defaultdict:
    return collections.defaultdict(int, _dict(inner))


MORE = [
    # user classes
    Step("dunder_dict", "@.__dict__['val']", "obj", "any", lib.Box, _attr),
    Step("type_attr", "type(@).val", "obj", "data", lambda v: type("K", (), {"val": v})(), _type),
    Step("user_getitem", "@['val']", "obj", "any", lib.Table, _inner_dict),
    Step("user_getattr", "@.val", "obj", "any", lib.Dynamic, _inner_dict),
    Step("slots", "@.val", "slots", "any", lib.Slotted, _attr),
    Step("classmethod", "@.value()", "cls", "any", lib.with_classmethod, _attr),
    # namedtuples and collections
    Step("namedtuple", "@.val", "tuple", "any", lambda v: lib.Pair(v, 0), None),
    Step("namedtuple_asdict", "@._asdict()['val']", "tuple", "any", lambda v: lib.Pair(v, 0), None),
    Step("defaultdict", "@['val']", "ddict", "any", _defaultdict, _item),
    Step(
        "ordereddict",
        "@['val']",
        "dict",
        "any",
        lambda v: collections.OrderedDict(_dict(v)),
        _item,
    ),
    Step("chainmap", "collections.ChainMap({}, @)['val']", "dict", "any", _dict, _item),
    Step("setdefault", "@.setdefault('val', 0)", "dict", "any", _dict, _item),
    Step("dict_ctor", "dict(@)['val']", "dict", "any", _dict, _item),
    Step("zip_dict", "dict(zip(@.keys(), @.values()))['val']", "dict", "any", _dict, _item),
    # iterator builtins
    Step("map", "list(map(lambda o: o.val, @))[1]", "list", "any", lib.ranked, _ranked),
    Step("filter", "next(filter(lambda o: o.on, @)).val", "list", "any", lib.ranked, _ranked),
    Step(
        "enumerate",
        "[w for i, w in enumerate(@) if i == 1][0]",
        "list",
        "any",
        lambda v: [0, v],
        _second,
    ),
    Step("reversed", "next(reversed(@))", "list", "any", lambda v: [0, v], _second),
    Step(
        "itertools_chain",
        "list(itertools.chain([], @))[1]",
        "list",
        "any",
        lambda v: [0, v],
        _second,
    ),
    Step("star_unpack", "(lambda a, b: b)(*@)", "list", "any", lambda v: [0, v], _second),
    # numbers out of strings, bytes and number holders
    Step("str_split", "float(@.split(',')[1])", "str", "num", lambda v: f"a,{v!r}", None),
    Step("int_base", "int(@, 10)", "str", "num", lambda v: str(int(v)), None),
    Step("decimal", "float(decimal.Decimal(@))", "str", "num", repr, None),
    Step("bytes", "float(@.decode())", "bytes", "num", lambda v: repr(v).encode(), None),
    Step("array_module", "@[0]", "arr", "num", lambda v: array.array("d", [v]), _first),
    Step("np_scalar", "float(@)", "npscalar", "num", np.float64, None),
    Step("np_asarray", "float(np.asarray(@)[0])", "list", "num", lambda v: [v, 0.0], _first),
    Step("math_fsum", "math.fsum(@)", "list", "num", lambda v: [v, 0.0], _first),
    Step("statistics", "statistics.mean(@)", "list", "num", lambda v: [v], _first),
]

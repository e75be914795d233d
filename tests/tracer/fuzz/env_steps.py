"""The steps of issue 35's grammar of environment access paths (``env_step``: what a step is),
each reading one level down: attributes, dict items and dict helpers, sequences and the builtins
that pick from them, callables, and numbers out of numpy arrays, strings and number containers;
``env_steps_more`` and ``env_steps_syntax`` add more. ``STEPS`` holds them all by name.

Tags (the kinds of object a step reads from): ``num`` (a Python float), ``obj`` (a plain object:
weak-referenceable), ``dc`` (a dataclass instance), ``cls`` (a class), ``ns`` (a
``SimpleNamespace``), ``slots`` (an object with ``__slots__``), ``dict``, ``ddict`` (a
``defaultdict``), ``list``, ``tuple``, ``str``, ``bytes``, ``array`` (numpy), ``npscalar``
(``np.float64``), ``arr`` (``array.array``), ``call`` (a closure), ``partial``
(``functools.partial``).
"""

from __future__ import annotations

import functools
import json
import types
from typing import Any

import numpy as np

from tests.tracer.fuzz import env_helpers as lib
from tests.tracer.fuzz.env_step import Step
from tests.tracer.fuzz.env_steps_more import MORE
from tests.tracer.fuzz.env_steps_syntax import SYNTAX


def _attr(obj: Any, new: Any) -> None:
    obj.val = new


def _item(d: Any, new: Any) -> None:
    d["val"] = new


def _ranked(items: list, new: Any) -> None:
    items[1].val = new


def _class_attr(obj: Any, new: Any) -> None:
    type(obj).val = new


def _prop(obj: Any, new: Any) -> None:
    obj._val = new


def _instance_of_class(inner: Any) -> Any:
    return type("Settings", (), {"val": inner})()


def _closure(inner: Any) -> Any:
    get, put = lib.cell(inner)
    get.put = put  # the setter travels with the getter, for ``put``
    return get


def _dict(inner: Any) -> dict:
    return {"val": inner, "other": 0}


def _array0(a: np.ndarray, new: Any) -> None:
    a[0] = new


def _scalar_array(a: np.ndarray, new: Any) -> None:
    a[()] = new


def _first(items: list, new: Any) -> None:
    items[0] = new


def _second(items: list, new: Any) -> None:
    items[1] = new


def _nested(d: dict, new: Any) -> None:
    d["a"]["val"] = new


def _keywords(p: Any, new: Any) -> None:
    p.keywords["cfg"] = new


def _values(d: dict, new: Any) -> None:
    d["a"] = new


_ALL = [
    # attributes of objects, classes, dataclasses, properties, namespaces
    Step("attr", "@.val", "obj", "any", lib.Box, _attr),
    Step("getattr", "getattr(@, 'val')", "obj", "any", lib.Box, _attr),
    Step("getattr_default", "getattr(@, 'val', None)", "obj", "any", lib.Box, _attr),
    Step("attrgetter", "operator.attrgetter('val')(@)", "obj", "any", lib.Box, _attr),
    Step("vars", "vars(@)['val']", "obj", "any", lib.Box, _attr),
    Step("property", "@.val", "obj", "any", lib.Prop, _prop),
    Step("class_attr", "@.val", "cls", "any", lambda v: type("Hold", (), {"val": v}), _attr),
    Step("instance_class_attr", "@.val", "obj", "data", _instance_of_class, _class_attr),
    Step("dataclass", "@.val", "dc", "any", lib.Conf, _attr),
    Step("asdict", "dataclasses.asdict(@)['val']", "dc", "notdc", lib.Conf, _attr),
    Step("namespace", "@.val", "ns", "any", lambda v: types.SimpleNamespace(val=v), _attr),
    Step("helper_getattr", "lib.pick_attr(@)", "obj", "any", lib.Box, _attr),
    # dict items and dict helpers
    Step("item", "@['val']", "dict", "any", _dict, _item),
    Step("get", "@.get('val')", "dict", "any", _dict, _item),
    Step("get_default", "@.get('val', {})", "dict", "any", _dict, _item),
    Step("itemgetter", "operator.itemgetter('val')(@)", "dict", "any", _dict, _item),
    Step("next_iter_values", "next(iter(@.values()))", "dict", "any", _dict, _item),
    Step("items_list", "list(@.items())[0][1]", "dict", "any", _dict, _item),
    Step("dict_comp", "{k: w for k, w in @.items()}['val']", "dict", "any", _dict, _item),
    Step("copy", "copy.copy(@)['val']", "dict", "any", _dict, _item),
    Step("deepcopy", "copy.deepcopy(@)['val']", "dict", "any", _dict, _item),
    Step("dict_copy", "@.copy()['val']", "dict", "any", _dict, _item),
    Step(
        "reduce_getitem",
        "functools.reduce(operator.getitem, ('a', 'val'), @)",
        "dict",
        "any",
        lambda v: {"a": {"val": v}},
        _nested,
    ),
    Step("helper_pick", "lib.pick(@)", "dict", "any", _dict, _item),
    Step("lambda", "(lambda c: c['val'])(@)", "dict", "any", _dict, _item),
    # sequences
    Step("list_item", "@[1]", "list", "any", lambda v: [0, v], _second),
    Step("tuple_item", "@[1]", "tuple", "any", lambda v: (0, v), None),
    Step("max_key", "max(@, key=lambda o: o.rank).val", "list", "any", lib.ranked, _ranked),
    Step("min_key", "min(@, key=lambda o: -o.rank).val", "list", "any", lib.ranked, _ranked),
    Step(
        "sorted_index",
        "sorted(@, key=operator.attrgetter('rank'))[-1].val",
        "list",
        "any",
        lib.ranked,
        _ranked,
    ),
    Step("listcomp", "[o.val for o in @ if o.on][0]", "list", "any", lib.ranked, _ranked),
    Step("genexpr", "next(o.val for o in @ if o.on)", "list", "any", lib.ranked, _ranked),
    # callables
    Step("closure", "@()", "call", "any", _closure, lambda get, new: get.put(new)),
    Step(
        "partial_call",
        "@()",
        "partial",
        "any",
        lambda v: functools.partial(lib.keyword, cfg=v),
        _keywords,
    ),
    Step(
        "partial_keywords",
        "@.keywords['cfg']",
        "partial",
        "any",
        lambda v: functools.partial(lib.keyword, cfg=v),
        _keywords,
    ),
    Step("weakref", "@()", "weakref", "weak", None, None),  # built by the program (keeps referents)
    # numbers out of numpy arrays, strings and number containers
    Step("np_index", "float(@[0])", "array", "num", lambda v: np.array([v, 0.5]), _array0),
    Step("np_item", "@.item()", "array", "num", lambda v: np.array(v), _scalar_array),
    Step("np_float", "float(@)", "array", "num", lambda v: np.array(v), _scalar_array),
    Step("np_tolist", "@.tolist()[0]", "array", "num", lambda v: np.array([v, 0.5]), _array0),
    Step("np_max", "float(np.max(@))", "array", "num", lambda v: np.array([v, -9.0]), _array0),
    Step("float_str", "float(@)", "str", "num", repr, None),
    Step("int_str", "int(@)", "str", "num", lambda v: str(int(v)), None),
    Step("json", "json.loads(@)['val']", "str", "num", lambda v: json.dumps({"val": v}), None),
    Step("format", "float('{:.3f}'.format(@))", "num", "num", lambda v: v, None),
    Step("fstring", 'float(f"{ @ }")', "num", "num", lambda v: v, None),
    Step("round", "round(@, 6)", "num", "num", lambda v: v, None),
    Step(
        "reduce_mul",
        "functools.reduce(operator.mul, @, 1.0)",
        "list",
        "num",
        lambda v: [v, 1.0],
        _first,
    ),
    Step("sum_genexpr", "sum(w for w in @)", "list", "num", lambda v: [v, 0.0], _first),
    Step("max_num", "max(@)", "list", "num", lambda v: [v, -1.0], _first),
    Step("sorted_num", "sorted(@)[-1]", "list", "num", lambda v: [-1.0, v], _second),
    Step("min_values", "min(@.values())", "dict", "num", lambda v: {"a": v, "b": 99.0}, _values),
]
STEPS: dict[str, Step] = {s.name: s for s in _ALL + MORE + SYNTAX}

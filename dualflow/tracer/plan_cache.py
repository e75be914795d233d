"""Compiled plans on disk: a new process reuses a stored trace instead of tracing again.

An entry holds the graphs after passes (text + constants), the access path of every captured
tensor and module (``state_paths``), the guard bookkeeping and the output structure. It is keyed
by the function's code, the argument signature, config, passes and dualflow's own source digest;
the user files the trace ran through are hashed again when it is loaded.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

import dualflow
from dualflow.graph_ir.ir import Graph
from dualflow.graph_ir.json_format import graph_from_data, graph_to_data
from dualflow.graph_ir.printer import print_graph
from dualflow.tracer.env_cache import NotStorable, encode_guards, fingerprint
from dualflow.tracer.record import Trace
from dualflow.tracer.signature import Flat
from dualflow.tracer.state_paths import UnreachableState, find_paths

FORMAT = 2  # bump when the entry layout changes


class NotCacheable(Exception):
    """Why a trace cannot be stored (it still runs; explain shows the reason)."""


def plan_cache_dir(option: str | os.PathLike | bool | None) -> Path | None:
    """Where plans are cached: ``cache_dir=`` of compile, else ``$DUALFLOW_PLAN_CACHE``.

    ``True`` or ``"1"`` mean the default ``~/.cache/dualflow/plans``; None/False/"" mean off.

    Example:
        >>> plan_cache_dir(False) is None, plan_cache_dir("/tmp/p").name
        (True, 'p')
    """
    if option is None:
        option = os.environ.get("DUALFLOW_PLAN_CACHE") or None
    if option is None or option is False or option in ("", "0"):
        return None
    if option is True or option == "1":
        return Path.home() / ".cache" / "dualflow" / "plans"
    return Path(option)


@functools.lru_cache(maxsize=1)
def package_digest() -> str:
    """Hash of dualflow's version and sources: any change to the compiler invalidates entries.

    Files are identified by size and modification time (as Python's own bytecode cache does):
    reading every source would cost more than loading a small plan.

    Example:
        >>> len(package_digest())
        64
    """
    digest = hashlib.sha256(dualflow.__version__.encode())
    root = os.path.dirname(dualflow.__file__)
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(f for f in files if f.endswith(".py")):
            info = os.stat(os.path.join(folder, name))
            digest.update(
                f"{folder[len(root) :]}/{name}:{info.st_size}:{info.st_mtime_ns};".encode()
            )
    return digest.hexdigest()


def _code_digest(code: types.CodeType, digest: Any) -> None:
    digest.update(code.co_code)
    digest.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_digest(const, digest)
        else:
            digest.update(repr(const).encode())


def _stable(part: Any) -> Any:
    # An object argument is keyed by id() in memory; on disk by its type (paths find it again).
    if isinstance(part, tuple):
        if len(part) == 3 and part[0] == "object":
            return ("object", part[1])
        return tuple(_stable(p) for p in part)
    return part


def cache_key(fn: Any, flat: Flat, snapshot: tuple, passes: tuple[str, ...]) -> str:
    """The disk key of a call: function code, stable signature, config, passes, dualflow.

    Example:
        >>> from dualflow.tracer.signature import flatten
        >>> key = cache_key(lambda x: x, flatten((1.0,), {}, ["x"]), (True,), ("dce",))
        >>> len(key)
        64
    """
    digest = hashlib.sha256()
    target = getattr(fn, "__func__", fn)
    if not isinstance(target, types.FunctionType):  # a Module: its class and forward
        target = getattr(type(fn), "forward", None) or type(fn).__call__
        digest.update(type(fn).__qualname__.encode())
    if isinstance(target, types.FunctionType):
        digest.update(f"{target.__module__}.{target.__qualname__}".encode())
        _code_digest(target.__code__, digest)
    parts = (_stable(flat.key), flat.aliases, snapshot, passes, np.__version__, package_digest())
    digest.update(repr((FORMAT, *parts)).encode())
    return digest.hexdigest()


def _file_hash(path: str) -> str:
    if path.startswith("<"):
        raise NotCacheable(f"its source {path} cannot be checked later")
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _encode_structure(node: Any) -> Any:
    kind, body = node
    if kind == "leaf":
        return {"leaf": body}
    if kind == "static":
        if body is not None and type(body) not in (bool, int, float, str):
            raise NotCacheable(f"it returns a {type(body).__name__} (not JSON-storable)")
        return {"static": body}
    if kind in (list, tuple):
        return {kind.__name__: [_encode_structure(v) for v in body]}
    if kind is dict and all(isinstance(k, str) for k, _ in body):
        return {"dict": [[k, _encode_structure(v)] for k, v in body]}
    raise NotCacheable(f"its return value holds a {kind!r} (only tuples/lists/str-keyed dicts)")


def decode_structure(data: dict[str, Any]) -> Any:
    """Inverse of the stored output structure encoding.

    Example:
        >>> decode_structure({"tuple": [{"leaf": 0}, {"static": 3}]})
        (<class 'tuple'>, [('leaf', 0), ('static', 3)])
    """
    ((kind, body),) = data.items()
    if kind in ("leaf", "static"):
        return (kind, body)
    if kind == "dict":
        return (dict, [(k, decode_structure(v)) for k, v in body])
    return ({"list": list, "tuple": tuple}[kind], [decode_structure(v) for v in body])


def _ref_record(ref: Any, path: list) -> dict[str, Any]:
    return {
        "kind": ref.kind,
        "path": path,
        "shape": list(ref.shape),
        "dtype": str(np.dtype(ref.dtype)),
        "device": ref.device,
        "name": ref.name,
        "requires_grad": ref.requires_grad,
    }


def _slot_record(slot: tuple[str, Any], paths: dict[int, list]) -> list[Any]:
    kind, where = slot
    return [kind, where if kind == "input" else paths[id(where)]]


def _objects(trace: Trace) -> list[Any]:
    """Every captured object the entry must find again, in a fixed order."""
    bwd = trace.backward
    objects = [ref.tensor for ref in trace.checks.refs]
    objects += [owner for owner, _ in trace.checks.empty_grads]
    objects += [module for module, _, _ in trace.checks.modules]
    for kind, where in (*trace.grad_owners, *trace.grads_to_none):
        if kind == "state":
            objects.append(where)
    if bwd is not None:
        if bwd.checks.empty_grads or bwd.checks.modules or bwd.checks.empty_input_grads:
            raise NotCacheable("its backward graph has checks beyond captured tensors")
        objects += [ref.tensor for ref in bwd.checks.refs]
    return objects


def _environment(trace: Trace) -> dict[str, Any]:
    """The Python-environment part of an entry: guards and fingerprints (env_cache)."""
    checks = trace.checks
    if trace.replay:
        raise NotCacheable(f"it has Python side effects ({', '.join(trace.replay.describe())})")
    if trace.history is not None:
        raise NotCacheable("its backward continues into an argument's autograd history")
    if checks.same_as_state or any(ref.kind == "array" for ref in checks.refs):
        raise NotCacheable("it reads a numpy array or an argument aliasing state")
    try:
        guards = encode_guards(checks.env)
        prints = [fingerprint(m) for m, _, _ in checks.modules]
    except NotStorable as exc:
        raise NotCacheable(str(exc)) from None
    return {
        "env": guards,
        "fingerprints": prints,
        "leaf_index": trace.leaf_index,
        "released_outputs": trace.released_outputs,
        "commits": trace.commits,
    }


def _meta(trace: Trace, roots: dict, files: set[str]) -> dict[str, Any]:
    environment = _environment(trace)
    try:
        objects = _objects(trace)
        found = find_paths(roots, objects)
    except UnreachableState as exc:
        raise NotCacheable(str(exc)) from None
    paths = {id(obj): path for obj, path in zip(objects, found)}
    checks, bwd = trace.checks, trace.backward
    meta: dict[str, Any] = {
        "refs": [_ref_record(r, paths[id(r.tensor)]) for r in checks.refs],
        "empty_grads": [[paths[id(o)], name] for o, name in checks.empty_grads],
        "empty_input_grads": checks.empty_input_grads,
        "modules": [[paths[id(m)], training] for m, _, training in checks.modules],
        "update_slots": trace.update_slots,
        "grad_owners": [_slot_record(s, paths) for s in trace.grad_owners],
        "grads_to_none": [_slot_record(s, paths) for s in trace.grads_to_none],
        "structure": _encode_structure(trace.rebuild.structure),  # type: ignore[attr-defined]
        "n_outputs": trace.n_outputs,
        "input_updates": trace.input_updates,
        "const_outputs": trace.const_outputs,
        "pass_stats": [list(vars(st).values()) for st in trace.pass_stats],
        "compile_seconds": trace.compile_seconds,
        "files": {path: _file_hash(path) for path in sorted(files)},
        "backward": None,
        **environment,
    }
    if bwd is not None:
        meta["backward"] = {
            "refs": [_ref_record(r, paths[id(r.tensor)]) for r in bwd.checks.refs],
            "n_residuals": len(bwd.residuals),
            "input_positions": bwd.input_positions,
            "state_slots": bwd.state_slots,
            "grad_outputs": bwd.grad_outputs,
            "mask": bwd.mask,
        }
    return meta


def _save_graph(graph: Graph, stem: Path, text: str | None = None) -> dict[str, Any]:
    """Constants go to ``stem.npz``; the text form is written for people to read, not loaded."""
    with open(stem.with_suffix(".npz"), "wb") as f:
        np.savez(f, **{f"const_{v.id}": np.asarray(a) for v, a in graph.consts.items()})
    stem.with_suffix(".graph").write_text(text or print_graph(graph))
    try:
        return graph_to_data(graph)
    except TypeError as exc:
        raise NotCacheable(str(exc)) from None


def _load_graph(stem: Path, data: dict[str, Any]) -> Graph:
    with np.load(stem.with_suffix(".npz"), allow_pickle=False) as stored:
        consts = {int(k[6:]): stored[k] for k in stored.files}
    return graph_from_data(data, consts)


def store(directory: Path, key: str, trace: Trace, roots: dict, files: set[str]) -> Path:
    """Write ``trace`` as an entry under ``directory/key``; returns the entry's folder.

    Raises:
        NotCacheable: the trace holds something that cannot be found again or stored.
    """
    meta = _meta(trace, roots, files)
    text = print_graph(trace.graph)  # also names the entry: same graph, same folder
    entry = directory / key / hashlib.sha256(text.encode()).hexdigest()[:16]
    if entry.exists():
        return entry
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".tmp-"))
    try:
        meta["forward"] = _save_graph(trace.graph, staging / "forward", text)
        if trace.backward is not None:
            meta["backward"]["graph"] = _save_graph(trace.backward.graph, staging / "backward")
        (staging / "meta.json").write_text(json.dumps(meta))
        os.replace(staging, entry)  # atomic: readers see a whole entry or none
    except OSError:
        if entry.exists():  # another process stored the same entry first
            shutil.rmtree(staging, ignore_errors=True)
            return entry
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return entry


def entries(
    directory: Path, key: str, skip: set[Path] = frozenset()
) -> Iterator[tuple[Path, dict[str, Any], Any, Any]]:
    """Stored entries for ``key`` whose user files are unchanged: (folder, meta, fwd, bwd).

    Entries in ``skip`` (already in memory) are left out.

    A damaged or stale entry is skipped (and a stale one removed), never an error.
    """
    folder = directory / key
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".tmp-") or entry in skip:
            continue
        try:
            meta = json.loads((entry / "meta.json").read_text())
            if any(_file_hash(p) != h for p, h in meta["files"].items()):
                shutil.rmtree(entry, ignore_errors=True)  # the user's code changed
                continue
            forward = _load_graph(entry / "forward", meta["forward"])
            backward = None
            if meta["backward"] is not None:
                backward = _load_graph(entry / "backward", meta["backward"]["graph"])
        except (OSError, ValueError, KeyError, TypeError, NotCacheable):
            continue
        yield entry, meta, forward, backward

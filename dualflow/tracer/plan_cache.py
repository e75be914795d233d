"""Compiled plans on disk: a new process reuses a stored trace instead of tracing again.

An entry holds the graphs after passes (JSON + constants), the access path of every captured
tensor and module (``state_paths``), the guard bookkeeping and the output structure. It is keyed
by the function's code, the argument signature, config, passes and dualflow's own source digest;
the user files the trace ran through are hashed again when it is loaded. Its files are signed
and verified (``disk_cache``), and its graphs verified, before anything in them is used.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import shutil
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dualflow import _version
from dualflow._config import cache_dir, user_path
from dualflow.disk_cache import Store, open_store
from dualflow.disk_trim import ENTRY_FILES, discard, plan_entry
from dualflow.disk_trust import MAX_ENTRY, Untrusted, make_private, read_regular, temp_prefix
from dualflow.errors import ConfigError
from dualflow.graph_ir.ir import Graph
from dualflow.graph_ir.json_format import graph_from_data, graph_to_data
from dualflow.graph_ir.printer import print_graph
from dualflow.graph_ir.verify import verify
from dualflow.kernels.base.machine_constants import machine_constants
from dualflow.tracer import pytree
from dualflow.tracer.env_cache import NotStorable, encode_guards, fingerprint
from dualflow.tracer.signature import Flat
from dualflow.tracer.state_paths import UnreachableState, find_paths
from dualflow.tracer.trace import Trace

# bump when the entry layout changes (2: signed files, 3: environment guards, 4: the output
# structure as a pytree TreeDef: leaves in order, OrderedDicts kept)
FORMAT = 4
_MAX_META = 64 * 2**20
_MAX_USER_SOURCE = 64 * 2**20  # a user file the trace ran through, hashed at store and load


class NotCacheable(Exception):
    """Why a trace cannot be stored (it still runs; explain shows the reason)."""


def plan_cache_dir(option: str | os.PathLike | bool | None) -> Path | None:
    """Where plans are cached: ``cache_dir=`` of compile, else ``$DUALFLOW_PLAN_CACHE``.

    ``True`` or ``"1"`` mean the default ``plans`` folder under ``_config.cache_dir()``;
    None/False/"" mean off; ``~`` is expanded.

    Raises:
        ConfigError: ``option`` is neither a path nor a bool.

    Example:
        >>> plan_cache_dir(False) is None, plan_cache_dir("/tmp/p").name
        (True, 'p')
    """
    if option is None:
        option = os.environ.get("DUALFLOW_PLAN_CACHE") or None
    if option is None or option is False or option in ("", "0"):
        return None
    if option is True or option == "1":
        return cache_dir() / "plans"
    if not isinstance(option, (str, os.PathLike)):
        raise ConfigError(
            f"cache_dir={option!r} must be a folder (str or os.PathLike), True, False or None"
        )
    return user_path(option)


@functools.lru_cache(maxsize=1)
def package_digest() -> str:
    """Hash of dualflow's version and sources: any change to the compiler invalidates entries.

    Files are identified by size and modification time (as Python's own bytecode cache does):
    reading every source would cost more than loading a small plan.

    Example:
        >>> len(package_digest())
        64
    """
    digest = hashlib.sha256(_version.__version__.encode())
    root = os.path.dirname(_version.__file__)  # the package's folder
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


def _stable(key: tuple) -> tuple:
    # An object argument is keyed by id() in memory; on disk by its type (paths find it again).
    trees, names, parts = key
    return (trees, names, tuple(("object", p[1]) if p[0] == "object" else p for p in parts))


def cache_key(fn: Any, flat: Flat, snapshot: tuple, passes: tuple[str, ...]) -> str:
    """The disk key of a call: function code, stable signature, config, passes, dualflow, the
    machine's constants.

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
    # the passes price by the machine's measured constants (remat): another machine's plans
    # in a shared cache folder are another key
    parts += (machine_constants(),)
    digest.update(repr((FORMAT, *parts)).encode())
    return digest.hexdigest()


def _file_hash(path: str) -> str:
    if path.startswith("<"):
        raise NotCacheable(f"its source {path} cannot be checked later")
    try:  # a regular file only: a FIFO or device named here must not hang the loader
        return hashlib.sha256(read_regular(path, _MAX_USER_SOURCE, own=False)).hexdigest()
    except Untrusted as exc:
        raise NotCacheable(str(exc)) from None


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


def _structure(tree: pytree.TreeDef) -> Any:
    try:
        return pytree.encode(tree)
    except pytree.Unencodable as exc:
        raise NotCacheable(str(exc)) from None


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
        "structure": _structure(trace.output_tree),
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


def _graph_files(graph: Graph, stem: str, files: dict[str, bytes]) -> dict[str, Any]:
    """Constants go to ``stem.npz``; the text form ``stem.graph`` is for people (never loaded)."""
    buffer = io.BytesIO()
    np.savez(buffer, **{f"const_{v.id}": np.asarray(a) for v, a in graph.consts.items()})
    files[f"{stem}.npz"] = buffer.getvalue()
    try:
        data = graph_to_data(graph)
    except TypeError as exc:
        raise NotCacheable(str(exc)) from None
    files[f"{stem}.graph"] = print_graph(graph).encode()
    return data


def _load_graph(cache: Store, stem: str, data: dict[str, Any]) -> Graph:
    payload = cache.load(f"{stem}.npz", MAX_ENTRY)
    if payload is None:
        raise _Damaged()
    with np.load(io.BytesIO(payload), allow_pickle=False) as stored:
        consts = {int(k[6:]): stored[k] for k in stored.files}
    return verify(graph_from_data(data, consts))  # plain attrs and known ops before lowering


class _Damaged(Exception):
    """An entry that cannot be used (already reported, or missing files)."""


def store(
    directory: Path, key: str, trace: Trace, roots: dict, files: set[str], extra: Any = None
) -> Path:
    """Write ``trace`` as an entry under ``directory/key``; returns the entry's folder.
    ``extra``: more JSON data for ``meta.json`` (a template's facts, ``template_cache``).

    Raises:
        NotCacheable: the trace holds something that cannot be found again or stored, or the
            folder is not trusted (a warning said why).
    """
    cache = open_store("plans", directory)
    if cache is None:
        raise NotCacheable(f"the plan cache folder {directory} is not used (see the warning)")
    meta = {**_meta(trace, roots, files), **(extra or {})}
    text = print_graph(trace.graph)  # also names the entry: same graph, same folder
    name = f"{key}/{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    entry = cache.directory / name
    if os.path.lexists(entry):
        if plan_entry(cache.root.key, cache.directory, name) is not None:
            return entry  # stored already (by this or another process)
        # a link, a file or a folder this cache did not write: the user's, never removed
        raise NotCacheable(f"{entry} exists and is not an entry of the plan cache; left alone")
    contents: dict[str, bytes] = {}
    meta["forward"] = _graph_files(trace.graph, "forward", contents)
    if trace.backward is not None:
        meta["backward"]["graph"] = _graph_files(trace.backward.graph, "backward", contents)
    contents["meta.json"] = json.dumps(meta).encode()
    assert contents.keys() <= ENTRY_FILES  # what the trim knows as an entry's files
    make_private(entry.parent)
    # the staging folder's name and the signed files mark them as the cache's (disk_trim)
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=temp_prefix(cache.root.key)))
    try:
        for file, payload in contents.items():  # signed under the entry's final name
            (staging / file).write_bytes(cache.signed(f"{name}/{file}", payload))
        os.replace(staging, entry)  # atomic: readers see a whole entry or none
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if entry.exists():  # another process stored the same entry first
            return entry
        raise
    cache.account(sum(map(len, contents.values())))
    return entry


def entries(
    directory: Path, key: str, skip: set[Path] = frozenset()
) -> Iterator[tuple[Path, dict[str, Any], Any, Any]]:
    """Stored entries for ``key`` whose user files are unchanged: (folder, meta, fwd, bwd).

    Entries in ``skip`` (already in memory) are left out. A damaged entry (a file that is not
    regular, not yours, too big, or whose signature or contents do not verify) is skipped with
    one warning and removed, a stale one removed: never an error, never a wait.
    """
    cache = open_store("plans", directory)
    if cache is None:
        return
    try:
        found = sorted(os.scandir(cache.directory / key), key=lambda e: e.name)
    except OSError:  # no entry yet, or the cache was deleted
        return
    for item in found:
        entry = Path(item.path)
        if item.name.startswith(".tmp-") or entry in skip:
            continue
        loaded = _load_entry(cache, f"{key}/{item.name}") if _is_folder(item) else None
        if loaded is not None:
            yield (entry, *loaded)


def _is_folder(item: os.DirEntry) -> bool:
    try:
        return item.is_dir(follow_symlinks=False)  # a link out of the cache is not an entry
    except OSError:
        return False


def _load_entry(cache: Store, name: str) -> tuple[dict[str, Any], Any, Any] | None:
    try:
        raw = cache.load(f"{name}/meta.json", _MAX_META)
        if raw is None:
            raise _Damaged()
        meta = json.loads(raw)
        meta["structure"] = pytree.decode(meta["structure"])  # checked here, not at a call
        if pytree.count_leaves(meta["structure"]) != len(meta["leaf_index"]):
            raise ValueError("the output structure does not match the outputs")
        if any(_file_hash(p) != h for p, h in meta["files"].items()):
            discard(cache.root.key, cache.directory, name)  # the user's code changed
            return None
        forward = _load_graph(cache, f"{name}/forward", meta["forward"])
        backward = None
        if meta["backward"] is not None:
            backward = _load_graph(cache, f"{name}/backward", meta["backward"]["graph"])
        return meta, forward, backward
    except FileNotFoundError:  # deleted meanwhile (by `dualflow cache clear`, or a user file)
        return None
    except _Damaged:
        pass
    # Only this user's signed bytes get here, but a bug or a dualflow upgrade must not make a
    # stored plan crash the call: whatever fails to decode or verify means "trace instead".
    except Exception as exc:
        cache.damaged(name, f"{type(exc).__name__}: {exc}")
    discard(cache.root.key, cache.directory, name)  # rebuilt by the next store (if it was ours)
    return None

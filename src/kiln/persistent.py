"""The persistent cache: compiled entries written to disk and loaded by a new process.

On (``kiln.config.cache_dir`` / ``KILN_CACHE_DIR`` set to a directory), each entry a
capture makes is written as one file: its guard, twin and glue sources, a portable
recipe for every object they name (``persistent_recipes``), the C guard plan's steps
encoded the same way, and the graph (its nodes as plain data, targets by recipe,
rebuilt as a GraphModule on load).  A frame cache's first miss in a new process loads the files
under the frame's key and tries their guards before capturing anything; a loaded entry
whose guard passes runs with no capture at all.  Its graph is compiled again by the
backend on the entry's first run (eager, aot_eager: cheap; inductor: AOTAutograd's and
inductor's own FX graph caches find the kernels compiled by the first process).

Keys (``frame_key``): the code object's whole content (``marshal``: bytecode, constants,
names, file name, qualname, line table), the function's defaults (by recipe), Kiln's
version and a hash of its source files, torch's version, Python's version and the
platform, and the compile settings (backend by registry name, fullgraph, dynamic, mode,
options).  The file holds those fields too and they are compared on load: a file whose
fields differ (stale), whose checksum fails (corrupt, cut short) or whose recipes do not
resolve is ignored with a warning and never trusted.  Files are written to a temporary
name and ``os.replace``d: two processes writing one entry each leave one whole file.

An entry that cannot be written (a graph break, symbolic sizes, an object with no
stable name: ``StoredForm.not_cacheable``, ``NotPortable``) is reported by the
``cache`` log kind and the ``cache_skip`` event, and stays in memory only.
"""
from __future__ import annotations

import hashlib
import marshal
import os
import pickle
import platform
import re
import sys
import tempfile
import time

import torch

from .backends import lookup
from .capture import compile_stored_graph, Entry, GeneratedCode
from .config import config
from .events import event
from .persistent_recipes import code_digest, decode_graph, decode_steps, encode_graph, encode_steps, NotPortable, recipe, Resolver
from .runtime import PlanSpec
from .user_warnings import warn

FORMAT = 1
MAGIC = b"KILNCE1\n"
SUFFIX = ".entry"
KILN_VERSION = "0.1.0"
_SOURCE_SUFFIXES = (".py", ".c", ".h", ".cpp")
_source_hash: list = []      # computed once per process


class CacheWarning(UserWarning):
    """A persistent-cache file was ignored (stale, corrupt) or could not be written."""


def enabled() -> bool:
    return bool(config.cache_dir)


def kiln_source_hash() -> str:
    """A hash of the content of every source file of the kiln package: a Kiln edited
    without a version bump never loads entries another Kiln wrote.  Reading ~170 files
    costs ~20 ms, so the content hash is itself kept in the cache directory under the
    files' (path, size, mtime) signature, and read from there while that is unchanged."""
    if _source_hash:
        return _source_hash[0]
    root = os.path.dirname(os.path.abspath(__file__))
    files = sorted(_source_files(root, ""))
    signature = hashlib.sha256()
    for rel, st in files:
        signature.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    memo = os.path.join(config.cache_dir, f"v{FORMAT}", f"kiln-source-{signature.hexdigest()[:32]}") \
        if config.cache_dir else None
    digest = None
    if memo is not None:
        try:
            with open(memo) as f:
                digest = f.read().strip() or None
        except OSError:
            pass
    if digest is None:
        h = hashlib.sha256()
        for rel, _ in files:
            h.update(rel.encode() + b"\0")
            with open(os.path.join(root, rel), "rb") as f:
                h.update(f.read())
        digest = h.hexdigest()
        if memo is not None:
            try:
                write_atomically(memo, digest.encode())
            except OSError:
                pass
    _source_hash.append(digest)
    return digest


def _source_files(folder: str, prefix: str):
    """``(path relative to the package, stat)`` of each source file under ``folder``."""
    with os.scandir(folder) as it:
        for entry in it:
            if entry.is_dir():
                if entry.name != "__pycache__":
                    yield from _source_files(entry.path, prefix + entry.name + "/")
            elif entry.name.endswith(_SOURCE_SUFFIXES):
                yield prefix + entry.name, entry.stat()


def settings_key(settings) -> tuple:
    """The compile settings as plain data; the backend by its registry name."""
    if lookup(settings.backend_name) is not settings.backend:
        raise NotPortable("the backend is a callable, not a registered backend name")
    return (settings.backend_name, settings.fullgraph, settings.dynamic, settings.mode, repr(settings.options_key()))


def frame_key(fn, settings) -> dict:
    """Every fact that changes what a capture of ``fn`` under ``settings`` makes, as plain
    data (``NotPortable`` where one has no portable form: the frame is not cached)."""
    kwdefaults = fn.__kwdefaults__ or {}
    return {
        "format": FORMAT,
        "kiln": (KILN_VERSION, kiln_source_hash()),
        "torch": torch.__version__,
        "python": sys.version,
        "platform": (platform.machine(), sys.platform),
        "code": code_digest(fn.__code__),
        "defaults": recipe(fn.__defaults__),
        "kwdefaults": tuple((k, recipe(v)) for k, v in sorted(kwdefaults.items())),
        "settings": settings_key(settings),
        "automatic_dynamic_shapes": config.automatic_dynamic_shapes,
    }


def frame_dir(key: dict) -> str:
    digest = hashlib.sha256(repr(sorted(key.items())).encode()).hexdigest()
    return os.path.join(config.cache_dir, f"v{FORMAT}", digest[:2], digest)


# -- writing ------------------------------------------------------------------------------
def save(fn, entry, settings) -> str | None:
    """Write ``entry`` of ``fn``'s frame; the path written, or None (the reason is the
    ``cache_skip`` event's)."""
    code = fn.__code__
    where = f"{getattr(code, 'co_qualname', code.co_name)} ({code.co_filename}:{code.co_firstlineno})"
    stored = entry.stored
    try:
        if stored is None:
            raise NotPortable("the entry was not made by a frame capture")
        if stored.not_cacheable:
            raise NotPortable(stored.not_cacheable)
        key = frame_key(fn, settings)
        record = _record(stored, key, where)
        record["counts"] = (entry.guard_count, entry.op_count)
    except NotPortable as e:
        event("cache_skip", frame=where, reason=str(e))
        return None
    except Exception as e:   # noqa: BLE001 - writing the cache must never break a compile
        event("cache_skip", frame=where, reason=f"{type(e).__name__}: {e}")
        return None
    folder = frame_dir(key)
    digest = hashlib.sha256(repr(_identity(record)).encode()).hexdigest()[:32]
    path = os.path.join(folder, digest + SUFFIX)
    try:
        write_atomically(path, encode_file(record))
    except OSError as e:
        warn(f"kiln: could not write the persistent cache entry {path}: {e}", CacheWarning)
        return None
    event("cache_write", frame=where, path=path)
    return path


def _record(stored, key: dict, where: str) -> dict:
    generated: GeneratedCode = stored.generated
    constants = {}
    for name, value in generated.globals.items():
        if name == stored.graph_ref:
            continue
        try:
            constants[name] = recipe(value)
        except NotPortable as e:
            if type(value) is list and _only_explained(name, generated):
                constants[name] = ("list", tuple(recipe(x) for x in value))
                continue
            raise NotPortable(f"{name} in the generated code: {e}") from None
    spec = generated.guard_plan
    plan = None if spec is None else (spec.nslots, encode_steps(spec.steps), spec.handoff)
    graph = None
    if stored.gm is not None:
        graph = (encode_graph(stored.gm.graph), type(stored.gm).__name__)
    code = tuple(marshal.dumps(c) for c in generated.code_objects())   # Python's version is in the key
    return {"key": key, "frame": where, "code": code, "name": generated.name, "guard_source": generated.guard_source,
            "twin_source": generated.twin_source, "glue_source": generated.glue_source,
            "names": generated.names, "line_map": generated.line_map, "constants": constants,
            "plan": plan, "graph": graph, "graph_ref": stored.graph_ref, "graph_mode": stored.graph_mode,
            "mutations_last": stored.mutations_last, "written": time.time()}


def _only_explained(name: str, generated) -> bool:
    """``name`` is used only by the guard's explain twin (a list of expected keys in the
    message): a copy by value serves it, as no guard or glue sees its identity."""
    pattern = re.compile(re.escape(name) + r"\b")
    return not pattern.search(generated.guard_source) and not pattern.search(generated.glue_source) \
        and not any(x is generated.globals[name] for step in (generated.guard_plan.steps if generated.guard_plan else ())
                    for x in step)


def _identity(record: dict) -> tuple:
    """What makes two writes the same entry: the sources with the entry's process-local
    name taken out, and the constants' recipes."""
    name = record["name"]
    return tuple(record[k].replace(name, "@") for k in ("guard_source", "twin_source", "glue_source")) + \
        (repr(sorted(record["constants"].items())), repr(record["graph"]).replace(name, "@"))


def encode_file(record: dict) -> bytes:
    payload = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
    return MAGIC + hashlib.sha256(payload).digest() + payload


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place: a reader
    sees the old file or the whole new one, never part of one."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# -- reading ------------------------------------------------------------------------------
class Corrupt(Exception):
    """A cache file that is not a whole file Kiln wrote."""


def decode_file(data: bytes) -> dict:
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 32:
        raise Corrupt("not a Kiln cache file (bad header)")
    digest, payload = data[len(MAGIC):len(MAGIC) + 32], data[len(MAGIC) + 32:]
    if hashlib.sha256(payload).digest() != digest:
        raise Corrupt("checksum mismatch (cut short or changed)")
    record = pickle.loads(payload)   # noqa: S301 - checked to be a whole file Kiln wrote
    if not isinstance(record, dict) or "key" not in record:
        raise Corrupt("not an entry record")
    return record


def entry_files(folder: str) -> list:
    try:
        names = [n for n in os.listdir(folder) if n.endswith(SUFFIX) and not n.startswith(".tmp-")]
    except OSError:
        return []
    paths = [os.path.join(folder, n) for n in names]
    return sorted(paths, key=lambda p: (_mtime(p), p))


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def load(fn, compiler) -> list:
    """The entries stored for ``fn``'s frame under ``compiler``'s settings, oldest first;
    files that are stale, corrupt or do not resolve are skipped with a warning."""
    settings = compiler.settings
    try:
        key = frame_key(fn, settings)
    except NotPortable:
        return []
    entries = []
    for path in entry_files(frame_dir(key))[:config.recompile_limit]:
        try:
            with open(path, "rb") as f:
                record = decode_file(f.read())
            if record["key"] != key:
                raise Corrupt("written for another code object, Kiln, torch or settings (stale)")
            entries.append(_entry(record, fn, compiler))
        except Exception as e:   # noqa: BLE001 - a bad file is ignored, never trusted
            warn(f"kiln: ignoring the persistent cache entry {path}: {type(e).__name__}: {e}", CacheWarning)
            continue
        event("cache_load", frame=record["frame"], path=path)
    return entries


class CompileOnFirstCall:
    """The compiled graph of a loaded entry, compiled by the backend on the entry's first
    run with that run's real inputs (as the capture compiles with the frame's), then
    put in the glue's namespace in its own place."""

    def __init__(self, gm, compiler, name: str, mutations_last: bool, ref: str):
        self.gm, self.compiler, self.name, self.mutations_last, self.ref = gm, compiler, name, mutations_last, ref
        self.namespace: dict | None = None

    def __call__(self, *inputs):
        compiled = compile_stored_graph(self.gm, list(inputs), self.compiler, self.name, self.mutations_last)
        if self.namespace is not None:
            self.namespace[self.ref] = compiled
        return compiled(*inputs)


def _entry(record: dict, fn, compiler) -> Entry:
    resolver = Resolver(compiler)
    namespace = {name: resolver.get(r) for name, r in record["constants"].items()}
    gm, stub, ref = None, None, record["graph_ref"]
    if record["graph"] is not None:
        gm = decode_graph(*record["graph"], resolver)
        if record["graph_mode"] == "forward":
            namespace[ref] = gm.forward
        else:
            stub = namespace[ref] = CompileOnFirstCall(gm, compiler, record["name"], record["mutations_last"], ref)
    plan = record["plan"]
    spec = None if plan is None else PlanSpec(plan[0], decode_steps(plan[1], resolver), plan[2])
    generated = GeneratedCode(record["name"], record["guard_source"], record["twin_source"], record["glue_source"],
                              namespace, record["names"], record["line_map"], (fn.__defaults__, fn.__kwdefaults__),
                              fn.__code__, spec, tuple(marshal.loads(c) for c in record["code"]))
    functions = generated.load()
    if stub is not None:
        stub.namespace = functions["glue"].__globals__
    guard_count, op_count = record["counts"]
    return Entry(functions["guard"], functions["explain"], functions["glue"], record["guard_source"],
                 record["glue_source"], gm, op_count, record["name"], guard_count, {"break": None, "loaded": True},
                 functions["gather"], record["line_map"])


# -- kiln cache ls | clear ------------------------------------------------------------------
def list_entries(cache_dir: str) -> list:
    """``(path, record or the reason it cannot be read)`` for each file under ``cache_dir``."""
    out = []
    root = os.path.join(cache_dir, f"v{FORMAT}")
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            if not name.endswith(SUFFIX) or name.startswith(".tmp-"):
                continue
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as f:
                    out.append((path, decode_file(f.read())))
            except Exception as e:   # noqa: BLE001 - listed as unreadable
                out.append((path, f"{type(e).__name__}: {e}"))
    return out


def clear(cache_dir: str) -> int:
    """Remove every entry file (and emptied folders) under ``cache_dir``; how many files."""
    removed = 0
    root = os.path.join(cache_dir, f"v{FORMAT}")
    for folder, _, files in os.walk(root, topdown=False):
        for name in files:
            if name.endswith(SUFFIX):
                os.unlink(os.path.join(folder, name))
                removed += 1
        try:
            os.rmdir(folder)
        except OSError:
            pass
    return removed

"""kiln cache ls|clear — see and empty the persistent cache (``kiln.persistent``).

The directory is ``--dir`` or else ``KILN_CACHE_DIR`` (``kiln.config.cache_dir``).
``ls`` prints one line per stored entry: the frame it compiles (name, file:line), the
backend, its size and age; a file that cannot be read says why (it is ignored by
Kiln, and ``clear`` removes it).  ``clear`` removes every entry file.
"""
from __future__ import annotations

import os
import time

from .cli import UsageError
from .config import config
from .persistent import clear, list_entries

HELP = "list or clear the persistent cache of compiled entries (KILN_CACHE_DIR)"


def add_arguments(parser) -> None:
    parser.add_argument("action", choices=("ls", "clear"), help="ls: list the entries; clear: remove them all")
    parser.add_argument("--dir", default=None, help="the cache directory (default: KILN_CACHE_DIR)")


def run(args) -> int:
    folder = args.dir or config.cache_dir
    if not folder:
        raise UsageError("no cache directory: pass --dir or set KILN_CACHE_DIR")
    if args.action == "clear":
        print(f"removed {clear(folder)} entries from {folder}")
        return 0
    entries = list_entries(folder)
    now = time.time()
    for path, record in entries:
        size = os.path.getsize(path) if os.path.exists(path) else 0
        if isinstance(record, str):
            print(f"{path}: unreadable ({record})")
            continue
        age = now - record.get("written", now)
        backend = record["key"]["settings"][0]
        print(f"{record['frame']}  backend={backend}  {size / 1024:.1f} KiB  {_age(age)} old  {path}")
    print(f"{len(entries)} entries in {folder}")
    return 0


def _age(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f} {unit}"
    return f"{seconds:.0f} s"

"""The inventory's cache: the merged view kept on disk, reused while what it was read from is unchanged.

Reading an inventory means YAML, pydantic and its validators: a quarter of a second of CPU
before a fleet command's first connection, for a file that rarely changes. So the merged view
is kept (one JSON file per way of loading it) and reused while:

- the way of loading is the same (the files named, whether the ssh_config is used, the home
  directory) and so is this package's inventory code (its modules' sizes and times);
- every file the load read has the same contents (SHA-256), and every file it looked for and
  did not find is still absent;
- every ``Include`` pattern it expanded matches the same files.

Nothing else goes into a merged view. An entry that does not read (another version's, a torn
write) is a miss, and a directory that cannot be written only costs the reuse: neither is ever
an error.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
from typing import TYPE_CHECKING, Any, Final

from ..keep import ABSENT, read_entry, write_whole
from ..models import Host, Inventory

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Reads", "entry_name", "lookup", "matches", "store"]

_VERSION: Final = 2  # 2: Host.from_ssh_config
_CODE: Final = (os.path.dirname(os.path.dirname(__file__)), os.path.dirname(__file__))


class Reads:
    """What a load depended on: each file read (SHA-256 of its bytes) or looked for and missing
    (``"absent"``), and each ``Include`` pattern with the files it matched."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.globs: dict[str, list[str]] = {}

    def read(self, path: str, data: bytes | None) -> None:
        self.files[path] = ABSENT if data is None else hashlib.sha256(data).hexdigest()

    def matched(self, pattern: str, paths: Sequence[str]) -> None:
        self.globs[pattern] = list(paths)


def matches(pattern: str) -> list[str]:
    """The files an ``Include`` pattern names, as ssh takes them: sorted, directories left out."""
    return [p for p in sorted(glob.glob(pattern)) if not os.path.isdir(p)]


def entry_name(inputs: Sequence[object]) -> str:
    """The entry for loading with ``inputs`` (JSON values), by this version of the code."""
    code = []
    for directory in _CODE:
        with contextlib.suppress(OSError):
            for item in sorted(os.scandir(directory), key=lambda e: e.name):
                if item.name.endswith(".py"):
                    stat = item.stat()
                    code.append([item.name, stat.st_size, stat.st_mtime_ns])
    key = json.dumps([_VERSION, code, list(inputs)], default=str)
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:40]


def lookup(directory: str, name: str) -> Inventory | None:
    """The kept inventory named ``name``, if nothing it was read from changed; else ``None``."""
    entry = read_entry(directory, name, _VERSION)
    if entry is None:
        return None
    try:
        if any(matches(pattern) != found for pattern, found in entry["globs"].items()):
            return None
        hosts = tuple(_host(fields) for fields in entry["hosts"])
        return Inventory(hosts=hosts, notes=tuple(str(note) for note in entry["notes"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _host(fields: dict[str, Any]) -> Host:
    given = frozenset(fields.pop("fields_set"))
    return Host.from_json(fields, given)


def store(directory: str, name: str, reads: Reads, inventory: Inventory) -> None:
    """Keep ``inventory`` under ``name`` (atomically) with what it was read from."""
    hosts = [{**h.to_json(), "fields_set": sorted(h.fields_set)} for h in inventory.hosts]
    entry = {"version": _VERSION, "files": reads.files, "globs": reads.globs, "hosts": hosts, "notes": inventory.notes}
    with contextlib.suppress(OSError):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        write_whole(os.path.join(directory, name + ".json"), json.dumps(entry).encode(), prefix=".inventory-")

"""What the caches kept on disk share: entries written whole, and read back only while the files
they were made from hold the same bytes (here and in ``remote_acp``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from typing import Any, Final

__all__ = ["ABSENT", "digest", "read_entry", "write_whole"]

ABSENT: Final = "absent"
"""The digest of a file that does not exist."""


def write_whole(path: str | os.PathLike[str], data: bytes, *, prefix: str) -> None:
    """Write ``data`` to ``path`` whole or not at all: into a new file beside it (named ``prefix``
    and random letters, readable by its owner alone), then renamed over it, so that a reader sees
    the old file or the new one and never a torn one.

    :raises OSError: the directory cannot be written (the temporary file is removed).
    """
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(os.fspath(path)) or ".", prefix=prefix)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def digest(path: str) -> str:
    """SHA-256 of the file's bytes, or :data:`ABSENT`.

    :raises OSError: it exists but cannot be read.
    """
    try:
        with open(path, "rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    except (FileNotFoundError, NotADirectoryError):
        return ABSENT


def read_entry(directory: str, name: str, version: int) -> dict[str, Any] | None:
    """The entry ``name`` (JSON) if it is of ``version`` and every file its ``files`` maps to a
    digest still has that digest; else ``None``, as for an entry that does not read."""
    try:
        with open(os.path.join(directory, name + ".json"), encoding="utf-8") as file:
            entry = json.load(file)
        if not isinstance(entry, dict) or entry.get("version") != version:
            return None
        if any(digest(path) != kept for path, kept in entry["files"].items()):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return entry

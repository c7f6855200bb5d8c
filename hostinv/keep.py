"""Keeping files on disk: written whole, read back only while the files they were made from hold
the same bytes, and whether a file or directory holds only what this user (or root) wrote.

Words: to *keep* is this layer's job, storing a file safely; a *cache* is what is built on it, an
answer kept and reused while its sources are unchanged (:mod:`hostinv.resolve_cache`,
:mod:`hostinv.inventory.cache`, and ``remote_acp``'s probe and ssh-options caches)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from typing import Any, Final

__all__ = ["ABSENT", "digest", "read_entry", "untrusted", "untrusted_file", "write_whole"]

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


def untrusted(directory: str | os.PathLike[str]) -> str | None:
    """Why ``directory`` cannot be trusted to hold what only this user wrote, or ``None``.

    A cache read back steers what runs (an ``ssh -G`` answer names a ProxyCommand), so the
    directory must be this user's own and writable by no one else; so must each directory above
    it, up to the first one the user owns (another user who can rename a parent can swap the
    whole tree). A parent owned by root and writable by no one else, or sticky (``/tmp``: no one
    renames what they do not own), is fine. A directory that does not exist yet is ``None``: it
    will be made by this user, mode 0700.
    """
    me = os.geteuid()
    path = os.path.abspath(os.fspath(directory))
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be examined ({exc.strerror or exc})"
    if info.st_uid != me:
        return f"{path} belongs to uid {info.st_uid}, not to this user (uid {me})"
    if info.st_mode & 0o022:
        return f"{path} is writable by other users (mode {info.st_mode & 0o7777:04o})"
    parent = os.path.dirname(path)
    while parent != path:
        path, parent = parent, os.path.dirname(parent)
        try:
            info = os.stat(path)
        except OSError as exc:
            return f"{path} cannot be examined ({exc.strerror or exc})"
        sticky = bool(info.st_mode & 0o1000)
        if info.st_mode & 0o022 and not sticky:
            return f"{path}, above it, is writable by other users (mode {info.st_mode & 0o7777:04o})"
        if info.st_uid == me or sticky:
            return None
        if info.st_uid != 0:
            return f"{path}, above it, belongs to uid {info.st_uid}, who could replace what is below"
    return None


def untrusted_file(path: str | os.PathLike[str], info: os.stat_result | None = None) -> str | None:
    """Why the file at ``path`` cannot be trusted to hold what only this user or root wrote, or
    ``None``. ``info``: the file's status as opened (``os.fstat``), else it is looked up.

    An inventory steers what runs as this user (an ssh option can name a program), so, as ssh
    refuses a ``~/.ssh/config`` with bad owner or permissions, the file must belong to this user
    or root and be writable by no one else. So must every directory above it, up to ``/`` (for
    the path as given and for the file a link leads to): whoever can write one can put another
    file in its place. A directory writable by everyone but sticky (``/tmp``) is fine, as no one
    renames there what they do not own.
    """
    me = os.geteuid()
    trusted = {me, 0}
    shown = os.fspath(path)
    try:
        if info is None:
            info = os.stat(path)
    except OSError as exc:
        return f"{shown} cannot be examined ({exc.strerror or exc})"
    if info.st_uid not in trusted:
        return f"{shown} belongs to uid {info.st_uid}, neither this user (uid {me}) nor root"
    if info.st_mode & 0o022:
        return f"{shown} is writable by other users (mode {info.st_mode & 0o7777:04o})"
    absolute = os.path.abspath(shown)
    seen: set[str] = set()
    for start in (os.path.dirname(absolute), os.path.dirname(os.path.realpath(absolute))):
        directory, parent = start, ""
        while directory != parent and directory not in seen:
            seen.add(directory)
            try:
                above = os.stat(directory)
            except OSError as exc:
                return f"{directory}, above {shown}, cannot be examined ({exc.strerror or exc})"
            if above.st_uid not in trusted:
                return f"{directory}, above {shown}, belongs to uid {above.st_uid}, who could replace it"
            if above.st_mode & 0o022 and not above.st_mode & 0o1000:
                mode = above.st_mode & 0o7777
                return f"{directory}, above {shown}, is writable by other users (mode {mode:04o})"
            directory, parent = os.path.dirname(directory), directory
    return None


def read_entry(directory: str, name: str, version: int) -> dict[str, Any] | None:
    """The entry ``name`` (JSON) if it is of ``version`` and every file its ``files`` maps to a
    digest still has that digest; else ``None``, as for an entry that does not read, or one in a
    directory another user could have written (:func:`untrusted`)."""
    if untrusted(directory) is not None:
        return None
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

"""File access for an agent that asks for it, jailed to the workspace (opt-in, local launches).

With ``SessionOptions.fs_read`` (and separately ``fs_write``) the client advertises
``fs.readTextFile`` / ``fs.writeTextFile`` and serves ``fs/read_text_file`` /
``fs/write_text_file``. Over ssh it never does: :func:`file_access` asks
:mod:`remote_acp.session.remote_rules`, the one place for what a remote launch gets.

What is served, and what is refused (a JSON-RPC error, and a notice for the caller naming the path):

- The path must be absolute and lie under the workspace, component by component: a ``..``
  anywhere is refused before anything is resolved, so is an absolute path elsewhere.
- No component may be a symbolic link, the last one included. The walk opens each directory
  with ``O_NOFOLLOW`` relative to the previous one (``openat``), and the file itself with
  ``O_NOFOLLOW`` too, then checks what was opened (``fstat``): a link swapped in after a check
  is never followed, because no check is separate from the open that counts.
- Only regular files: a device, FIFO or socket is refused (opened ``O_NONBLOCK``, so a FIFO
  cannot hang the open; it is refused by a stat before that in the common case).
- Only files with one link: a hard link is the same file under another name, possibly outside
  the workspace, and nothing about it says which name is the real one. So a regular file with
  ``st_nlink > 1`` is neither read nor replaced.
- Writing never changes an existing file in place: the content goes to a new file in the same
  directory, which is then renamed over the name (``os.replace``). A rename replaces the name, not
  the file it named, so even a link made after the check cannot carry the write outside; a
  reader of the old file keeps the old content, and no one sees a half-written file. The
  replaced file's permission bits are kept (not its owner: the new file is this user's).
- A file larger than :data:`MAX_READ_BYTES` is refused, whatever ``line``/``limit`` ask for
  (the bound is on what is read, not on what is sent); content to write is bounded by
  :data:`MAX_WRITE_BYTES`. Writing creates or replaces a file; it never creates a directory.

The workspace itself is trusted as the operator gave it (its own path may go through links).
This bounds what *the client* serves: the agent process still runs as this user, with this
user's rights on every file it can reach by itself.

The parsing and the jail are pure functions; the I/O runs in a worker thread
(:meth:`FileServer.serve`), never on the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread

from ..protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from .remote_rules import rules_for

if TYPE_CHECKING:
    from ..options import SessionOptions

__all__ = [
    "FS_METHODS",
    "MAX_READ_BYTES",
    "MAX_WRITE_BYTES",
    "RESOURCE_NOT_FOUND",
    "FileAccess",
    "FileOutcome",
    "FileServer",
    "Refused",
    "ReadRequest",
    "WriteRequest",
    "file_access",
    "jail",
    "parse_read",
    "parse_write",
    "read_below",
    "select_lines",
    "write_below",
]

READ_METHOD: Final = "fs/read_text_file"
WRITE_METHOD: Final = "fs/write_text_file"
FS_METHODS: Final = (READ_METHOD, WRITE_METHOD)
MAX_READ_BYTES: Final = 1024 * 1024
"""A file larger than this (1 MiB) is not read, even for a few of its lines."""
MAX_WRITE_BYTES: Final = 1024 * 1024
"""Content to write, UTF-8 encoded, may be at most this long (1 MiB)."""
RESOURCE_NOT_FOUND: Final = -32002
"""ACP's error code for a missing resource (a file that does not exist is not a refusal)."""
REFUSED: Final = INVALID_PARAMS
"""A path or request this client will not serve: the error code of every refusal."""
PATH_CAP: Final = 300
"""How much of a path a notice or error quotes."""

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FLAGS: Final = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class FileAccess:
    """What a session advertises and serves: reading, writing, both or neither."""

    read: bool = False
    write: bool = False

    @property
    def enabled(self) -> bool:
        return self.read or self.write


def file_access(options: SessionOptions, *, remote: bool) -> FileAccess:
    """What the options ask for, as far as the launch's rules allow (never anything over ssh)."""
    if not rules_for(remote).file_system:
        return FileAccess()
    return FileAccess(read=options.fs_read, write=options.fs_write)


class Refused(Exception):
    """A request not served: the JSON-RPC ``code`` and the ``reason`` (without the path).

    ``notice``: a refusal the jail made (the caller hears of it), rather than an ordinary
    failure such as a missing file."""

    def __init__(self, code: int, reason: str, *, notice: bool = True) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.notice = notice


@dataclass(frozen=True, slots=True)
class ReadRequest:
    path: str
    line: int | None = None
    """1-based first line."""
    limit: int | None = None
    """Most lines returned."""


@dataclass(frozen=True, slots=True)
class WriteRequest:
    path: str
    content: str


def _path_param(params: Any) -> tuple[dict[str, Any], str]:
    if not isinstance(params, dict):
        raise Refused(INVALID_PARAMS, "the params are not an object", notice=False)
    path = params.get("path")
    if not isinstance(path, str) or not path:
        raise Refused(INVALID_PARAMS, "no path was given", notice=False)
    return params, path


def _positive(params: dict[str, Any], name: str) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if type(value) is not int or value < 1:
        raise Refused(INVALID_PARAMS, f"{name} must be a positive integer", notice=False)
    return value


def parse_read(params: Any) -> ReadRequest:
    """The ``fs/read_text_file`` params. :raises Refused: when they are malformed."""
    obj, path = _path_param(params)
    return ReadRequest(path, _positive(obj, "line"), _positive(obj, "limit"))


def parse_write(params: Any) -> WriteRequest:
    """The ``fs/write_text_file`` params. :raises Refused: malformed, or content over the bound."""
    obj, path = _path_param(params)
    content = obj.get("content")
    if not isinstance(content, str):
        raise Refused(INVALID_PARAMS, "content must be a string", notice=False)
    if len(content) > MAX_WRITE_BYTES or len(content.encode("utf-8", "surrogatepass")) > MAX_WRITE_BYTES:
        raise Refused(REFUSED, f"the content is over the bound of {MAX_WRITE_BYTES} bytes")
    return WriteRequest(path, content)


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def jail(roots: tuple[str, ...], path: str) -> tuple[str, tuple[str, ...]]:
    """Which root ``path`` lies under, and its components below it. Pure: nothing is resolved.

    ``roots`` are absolute spellings of the workspace (as given, and resolved); a path under
    any of them is accepted for the walk, which then refuses links on the way.

    :raises Refused: a NUL or a name no file can have (a lone surrogate), a relative path, a
        ``..`` component, a path outside every root, or the workspace itself.
    """
    if "\0" in path:
        raise Refused(REFUSED, "the path contains a NUL character")
    try:
        os.fsencode(path)
    except UnicodeEncodeError:  # a lone surrogate: no file can have this name
        raise Refused(REFUSED, "the path is not a file name this system can encode") from None
    if not path.startswith("/"):
        raise Refused(REFUSED, "the path is not absolute")
    parts = _parts(path)
    if ".." in parts:
        raise Refused(REFUSED, "the path has a '..' component")
    for root in roots:
        base = _parts(root)
        if parts[: len(base)] == base:
            below = tuple(parts[len(base) :])
            if not below:
                raise Refused(REFUSED, "the path is the workspace itself, not a file in it")
            return root, below
    raise Refused(REFUSED, "the path is outside the workspace")


def select_lines(text: str, line: int | None, limit: int | None) -> str:
    """The lines ``line`` (1-based) to ``line + limit - 1`` of ``text``, line ends kept."""
    if line is None and limit is None:
        return text
    lines = text.splitlines(keepends=True)
    start = (line or 1) - 1
    end = len(lines) if limit is None else start + limit
    return "".join(lines[start:end])


# -- I/O (blocking: run in a worker thread) ---------------------------------------------------


def _not_a_regular_file(mode: int) -> Refused | None:
    if stat.S_ISLNK(mode):
        return Refused(REFUSED, "the file is a symbolic link")
    if not stat.S_ISREG(mode):
        return Refused(REFUSED, "not a regular file (a directory, device, FIFO or socket)")
    return None


def _linked_elsewhere(st: os.stat_result) -> Refused | None:
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        return Refused(REFUSED, f"the file has {st.st_nlink} hard links: it may be a file outside the workspace")
    return None


def _os_refusal(exc: OSError, what: str) -> Refused:
    if exc.errno == errno.ENOENT:
        return Refused(RESOURCE_NOT_FOUND, f"{what} does not exist", notice=False)
    if exc.errno == errno.ELOOP:
        return Refused(REFUSED, f"{what} is a symbolic link")
    if exc.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
        return Refused(REFUSED, "not a regular file (a directory, device, FIFO or socket)")
    return Refused(INTERNAL_ERROR, f"{what} could not be opened: {exc.strerror or exc}", notice=False)


def _open_parent(root: str, parts: tuple[str, ...]) -> int:
    """A descriptor of the directory holding ``parts[-1]``, reached without following a link."""
    dirfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the workspace: trusted as given
    try:
        for part in parts[:-1]:
            try:
                fd = os.open(part, _DIR_FLAGS, dir_fd=dirfd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    try:
                        mode = os.stat(part, dir_fd=dirfd, follow_symlinks=False).st_mode
                    except OSError:
                        mode = 0
                    if stat.S_ISLNK(mode) or exc.errno == errno.ELOOP:
                        raise Refused(REFUSED, f"a directory on the path ({part!r}) is a symbolic link") from None
                    raise Refused(REFUSED, f"{part!r} on the path is not a directory") from None
                raise _os_refusal(exc, f"the directory {part!r}") from None
            os.close(dirfd)
            dirfd = fd
    except BaseException:
        os.close(dirfd)
        raise
    return dirfd


def read_below(root: str, parts: tuple[str, ...], line: int | None = None, limit: int | None = None) -> str:
    """Read the file ``parts`` names below ``root`` (see the module's rules).

    :raises Refused: a link, a special file, a file over :data:`MAX_READ_BYTES`, or an error.
    """
    dirfd = _open_parent(root, parts)
    name = parts[-1]
    try:
        try:  # a special file is refused before it is opened (opening a device may do something)
            refusal = _not_a_regular_file(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
        except OSError as exc:
            raise _os_refusal(exc, "the file") from None
        if refusal is not None:
            raise refusal
        try:
            fd = os.open(name, os.O_RDONLY | _OPEN_FLAGS, dir_fd=dirfd)
        except OSError as exc:
            raise _os_refusal(exc, "the file") from None
    finally:
        os.close(dirfd)
    try:
        st = os.fstat(fd)  # what was opened is what counts: it may have been swapped since the stat
        if (refusal := _not_a_regular_file(st.st_mode) or _linked_elsewhere(st)) is not None:
            raise refusal
        if st.st_size > MAX_READ_BYTES:
            raise Refused(REFUSED, f"the file is {st.st_size} bytes, over the bound of {MAX_READ_BYTES}")
        data = _read_at_most(fd, MAX_READ_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_READ_BYTES:  # it grew since the fstat
        raise Refused(REFUSED, f"the file is over the bound of {MAX_READ_BYTES} bytes")
    return select_lines(data.decode("utf-8", "replace"), line, limit)


def _read_at_most(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 256 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_below(root: str, parts: tuple[str, ...], content: str) -> None:
    """Create or replace the file ``parts`` names below ``root`` (see the module's rules).

    :raises Refused: a link (symbolic or hard), a special file, a missing directory, or an error.
    """
    data = content.encode("utf-8", "surrogatepass")
    dirfd = _open_parent(root, parts)
    name = parts[-1]
    try:
        try:
            old: os.stat_result | None = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except FileNotFoundError:
            old = None  # a new file
        except OSError as exc:
            raise _os_refusal(exc, "the file") from None
        if old is not None and (refusal := _not_a_regular_file(old.st_mode) or _linked_elsewhere(old)) is not None:
            raise refusal
        _replace(dirfd, name, data, None if old is None else stat.S_IMODE(old.st_mode) & 0o777)
    finally:
        os.close(dirfd)


def _replace(dirfd: int, name: str, data: bytes, mode: int | None) -> None:
    """Write ``data`` to a new file in ``dirfd`` and rename it over ``name``.

    ``mode``: the permission bits of the file being replaced, or ``None`` for a new file (which
    gets ``0o666`` less the umask, as any file this user creates).
    """
    temp = f".remote-acp-{secrets.token_hex(8)}.tmp"  # short: a name near the length limit still fits
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise Refused(RESOURCE_NOT_FOUND, "its directory does not exist", notice=False) from None
        raise Refused(INTERNAL_ERROR, f"the file could not be written: {exc.strerror or exc}", notice=False) from None
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)  # the rename must not be able to land before the content
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except OSError as exc:
        _discard(dirfd, temp)
        if exc.errno in (errno.EISDIR, errno.ENOTDIR, errno.ENOTEMPTY):  # a directory appeared at the name
            raise Refused(REFUSED, "not a regular file (a directory, device, FIFO or socket)") from None
        raise Refused(INTERNAL_ERROR, f"the file could not be written: {exc.strerror or exc}", notice=False) from None
    except BaseException:
        _discard(dirfd, temp)
        raise


def _discard(dirfd: int, temp: str) -> None:
    with contextlib.suppress(OSError):  # already renamed or gone: nothing of ours is left behind
        os.unlink(temp, dir_fd=dirfd)


# -- the session's server ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileOutcome:
    """The answer to one file request: a ``result``, or an error ``code`` and ``message``; and,
    for a refusal, the ``refusal`` reason to tell the caller about, with the ``path`` asked for."""

    result: dict[str, Any] | None = None
    code: int = 0
    message: str = ""
    path: str = ""
    refusal: str | None = None


class FileServer:
    """Serves the advertised file methods of one session inside ``workspace``."""

    def __init__(self, workspace: str, access: FileAccess) -> None:
        self.workspace = workspace
        self.access = access
        self._roots: tuple[str, ...] | None = None

    def handles(self, method: str) -> bool:
        """Whether ``method`` was advertised (the other one stays a protocol violation)."""
        return (method == READ_METHOD and self.access.read) or (method == WRITE_METHOD and self.access.write)

    def _workspace_roots(self) -> tuple[str, ...]:
        if self._roots is None:
            given = os.path.normpath(self.workspace)
            resolved = os.path.realpath(given)
            self._roots = (given,) if resolved == given else (given, resolved)
        return self._roots

    def _serve_blocking(self, method: str, params: Any) -> dict[str, Any]:
        if method == READ_METHOD:
            read = parse_read(params)
            root, parts = jail(self._workspace_roots(), read.path)
            return {"content": read_below(root, parts, read.line, read.limit)}
        write = parse_write(params)
        root, parts = jail(self._workspace_roots(), write.path)
        write_below(root, parts, write.content)
        return {}

    async def serve(self, method: str, params: Any) -> FileOutcome:
        """Answer one request; the I/O runs in a worker thread."""
        path = params.get("path") if isinstance(params, dict) else None
        shown = path if isinstance(path, str) else ""
        try:
            result = await anyio.to_thread.run_sync(self._serve_blocking, method, params)
        except OSError as exc:  # the workspace itself went away, or the like
            refused = Refused(INTERNAL_ERROR, f"the file could not be served: {exc.strerror or exc}", notice=False)
        except Refused as exc:
            refused = exc
        except ValueError as exc:  # anything else the request's text makes the OS layer refuse
            refused = Refused(REFUSED, f"the request cannot be served: {type(exc).__name__}")
        else:
            return FileOutcome(result=result, path=shown)
        return FileOutcome(
            code=refused.code,
            message=f"{refused.reason}: {shown[:PATH_CAP]!r}" if shown else refused.reason,
            path=shown,
            refusal=refused.reason if refused.notice else None,
        )

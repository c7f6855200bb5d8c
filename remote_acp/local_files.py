"""Reading a small file an operator names (a workflow, a tool-server list) without being held up.

``open()`` on a FIFO blocks until a writer comes, and a device can be read forever; either would
hang a command that only meant to read its configuration. So the file is opened non-blocking,
checked to be a regular file before a byte is read, and read up to a bound.
"""

from __future__ import annotations

import os
import stat

__all__ = ["NotRegularFileError", "TooLargeError", "read_small_file"]


class NotRegularFileError(OSError):
    """The path names a FIFO, a device, a socket or a directory."""


class TooLargeError(OSError):
    """The file is larger than the bound."""


def read_small_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The whole content of the regular file at ``path``, at most ``limit`` bytes.

    :raises NotRegularFileError: not a regular file (nothing was read).
    :raises TooLargeError: larger than ``limit``.
    :raises OSError: the file cannot be opened or read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(f"{os.fspath(path)} is not a regular file")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise TooLargeError(f"{os.fspath(path)} is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)

"""How many sessions one process can hold: its open-file limit.

Every session holds a handful of descriptors (three pipes, the supervisor's lifeline and report
pipe, a pidfd), so the soft ``RLIMIT_NOFILE`` of 1024 most systems give stops a scheduler at
about two hundred concurrent sessions. The hard limit is usually far higher and the soft one
may be raised to it without privileges: the command line does so when it starts, and a library
user calls :func:`raise_open_file_limit` once. Running out anyway is a typed error that says so
(:func:`out_of_descriptors`), not a retryable start failure.
"""

from __future__ import annotations

import errno
import resource
from typing import Final

from ..errors import Cause, ErrorKind, RemoteAcpError

__all__ = ["DESCRIPTOR_ERRNOS", "out_of_descriptors", "raise_open_file_limit"]

DESCRIPTOR_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE})


def raise_open_file_limit(wanted: int | None = None) -> tuple[int, int]:
    """Raise this process's soft open-file limit to ``wanted`` (default: the hard limit), never
    above the hard limit and never lowering it; return the (soft, hard) limits now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    target = ceiling if wanted is None else min(wanted, ceiling)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):  # a platform that refuses (macOS caps it below the hard limit)
            return soft, hard
        soft = target
    return soft, hard


def out_of_descriptors(exc: OSError) -> RemoteAcpError:
    """The error for a start that ran out of file descriptors: not retryable as it is (more
    sessions will not free any), with the fix."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    where = "this process" if exc.errno == errno.EMFILE else "the system"
    return RemoteAcpError(
        ErrorKind.PORT_EXIT,
        f"{where} ran out of file descriptors starting the agent (open-file limit {soft}, hard limit {hard}): "
        "close sessions, or raise the limit (ulimit -n, or remote_acp.raise_open_file_limit())",
        cause=Cause.OUT_OF_DESCRIPTORS,
    )

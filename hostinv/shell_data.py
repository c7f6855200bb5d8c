"""Data for a POSIX sh script that no shell reads as code: the one encoding the probe script
(:mod:`hostinv.probes.command`) and the session script (``remote_acp``'s ssh loader) carry their
data in.

The data is a POSIX sh snippet of assignments, each value quoted by :func:`shlex.quote`. It
travels as one line, ``VARIABLE='...'`` (:func:`data_line`), of the bytes of :data:`PLAIN` as they
are and every other byte as an octal escape (``\\0ooo``). The script decodes it on the host with
``printf %b`` (the format ``'%b.'``, then the dot cut off, so that command substitution keeps a
trailing newline) and evaluates the result. No run of those characters, cut anywhere, quotes,
separates, expands or escapes in any shell: a login script that reads part of stdin, or another
shell reading the script as its own commands, can make the data arrive incomplete, never run a
byte of it. A last assignment the script checks for (``..._complete=1``) tells a whole line from
a cut one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["PLAIN", "data_line"]

PLAIN: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._,:+=@%-")
"""The bytes the data line keeps as they are: none of them quotes, separates, expands or escapes
in any shell, so no run of them, cut anywhere, is more than one word."""


def data_line(variable: str, lines: Sequence[str]) -> str:
    """``variable='...'``: ``lines`` (POSIX sh, assignments whose values :func:`shlex.quote`
    quoted), joined by newlines and encoded as the module docstring says. A str holding
    surrogate escapes (as ``os.environ`` gives for undecodable bytes) travels as its original
    bytes.

    :raises ValueError: a ``variable`` that is not a shell variable name.
    """
    if not (variable.isascii() and variable.replace("_", "a").isalnum() and not variable[:1].isdigit()):
        raise ValueError(f"not a shell variable name: {variable!r}")
    raw = "\n".join(lines).encode("utf-8", "surrogateescape")
    return variable + "='" + "".join(chr(b) if b in PLAIN else f"\\0{b:03o}" for b in raw) + "'"

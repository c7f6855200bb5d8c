"""Errors of ``hostinv``: one class per thing a caller can act on differently.

An inventory file that cannot be used is :class:`InventoryInvalid` (its content) or
:class:`InventoryUnreadable` (the file itself); a selector that cannot be used is
:class:`SelectorInvalid` (malformed) or :class:`SelectorUnmatched` (names nothing). Each message
names what to fix, so a command can print it as it is.
"""

from __future__ import annotations

__all__ = ["HostinvError", "InventoryInvalid", "InventoryUnreadable", "SelectorInvalid", "SelectorUnmatched"]


class HostinvError(Exception):
    """Root of every error ``hostinv`` raises on purpose."""


class InventoryInvalid(HostinvError, ValueError):
    """An inventory file's content cannot be used: a syntax error or a value of the wrong shape.

    ``source`` names the file, ``line`` (1-based) is where the parser saw the problem when it
    knows one, and ``key`` the path of the offending value (``hosts.build-1.port``).
    """

    def __init__(self, source: str, reason: str, *, line: int | None = None, key: str | None = None) -> None:
        self.source = source
        self.reason = reason
        self.line = line
        self.key = key
        where = source if line is None else f"{source}:{line}"
        at = f" at {key}" if key else ""
        super().__init__(f"{where}: invalid inventory{at}: {reason}")


class InventoryUnreadable(HostinvError, OSError):
    """An inventory file could not be read or written (missing, a directory, no permission)."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}")

    def __str__(self) -> str:  # OSError's own __str__ would print the args tuple
        return f"{self.source}: {self.reason}"


class SelectorInvalid(HostinvError, ValueError):
    """A selector is malformed (blanks, a port out of range, a leading ``-`` that reads as an option)."""


class SelectorUnmatched(HostinvError, LookupError):
    """A selector matches no host of the inventory (an unknown name, group or a glob matching none)."""

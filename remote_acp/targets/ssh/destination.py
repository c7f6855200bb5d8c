"""Where to connect: the ssh destination as a person writes it, parsed once and refused when it
could read as an option."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ErrorKind, RemoteAcpError

__all__ = ["Destination", "parse_destination"]


@dataclass(frozen=True, slots=True)
class Destination:
    """Where to connect: what ssh is given as the destination, and an explicit port if any."""

    host: str
    port: int | None = None

    @property
    def label(self) -> str:
        """The destination as a person would write it (and :func:`parse_destination` reads)."""
        if self.port is None:
            return self.host
        user, at, address = self.host.rpartition("@")
        if ":" in address:
            address = f"[{address}]"
        return f"{user}{at}{address}:{self.port}"


def parse_destination(text: str) -> Destination:
    """Parse ``alias``, ``user@host``, ``host:port``, ``[v6addr]:port`` or a bare IPv6 address.

    :raises RemoteAcpError: ``agent_not_found`` for an empty or unsafe destination (one starting
        with ``-`` could be read as an option).
    """
    host = text.strip()
    if not host or any(c.isspace() or not c.isprintable() for c in host):
        raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"the ssh destination {text!r} is empty or contains blanks")
    user, at, rest = host.rpartition("@")
    port: int | None = None
    if rest.startswith("["):
        addr, bracket, tail = rest[1:].partition("]")
        if not bracket or (tail and not tail.startswith(":")):
            raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"the ssh destination {text!r} is not well formed")
        rest, port_text = addr, tail[1:]
        port = _port(port_text, text) if tail else None
    elif rest.count(":") == 1:
        rest, port_text = rest.split(":")
        port = _port(port_text, text)
    if not rest or rest.startswith("-") or user.startswith("-"):
        raise RemoteAcpError(
            ErrorKind.AGENT_NOT_FOUND, f"the ssh destination {text!r} is refused: it would read as an option"
        )
    return Destination(f"{user}{at}{rest}", port)


def _port(text: str, whole: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"the ssh destination {whole!r} has an invalid port")
    return int(text)

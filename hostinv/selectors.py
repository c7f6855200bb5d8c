"""Selectors: how every fleet command names the hosts it acts on.

A selector is one of, tried in this order:

- ``@group`` -- the hosts of a group (``@all``: every host; ``@ungrouped``: hosts in no group);
- a glob with ``*``, ``?`` or ``[...]`` (``build-*``, ``build-0[1-4]``) -- the inventory names it
  matches (a selector starting with ``[`` is an IPv6 address, not a glob);
- an inventory name (ssh_config aliases are inventory names);
- ``user@host``, ``host:port``, ``[v6addr]:port``, or a bare IP address -- a host given by its
  address. When the host part is an inventory name, that host with the user and port given here;
  otherwise a host in no inventory, named as written.

A bare word that is no inventory name is an error, not a guess: ``buidl-7`` is far more often a
typo than a host to reach by DNS (write ``buidl-7:22`` to mean the address). Every selector must
match at least one host. The result is in inventory order, each host once; hosts in no
inventory follow, in selector order.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from typing import TYPE_CHECKING

from .errors import SelectorInvalid, SelectorUnmatched
from .models import MAX_NAME, Host, Inventory

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["parse_address", "select"]

_GLOB = frozenset("*?[")


def select(inventory: Inventory, selectors: Iterable[str]) -> list[Host]:
    """The hosts ``selectors`` name, in inventory order, each once; hosts in no inventory last.

    :raises SelectorInvalid: a malformed selector (blanks, a bad port, a leading ``-``).
    :raises SelectorUnmatched: a selector that names no host (the message says what exists).
    """
    chosen: set[str] = set()
    extra: dict[str, Host] = {}
    for selector in selectors:
        found = _match(inventory, selector)
        if isinstance(found, Host):
            extra.setdefault(found.destination, found)
        else:
            chosen.update(found)
    return [h for h in inventory.hosts if h.name in chosen] + list(extra.values())


def _match(inventory: Inventory, selector: str) -> set[str] | Host:
    text = selector.strip()
    if not text or any(c.isspace() or not c.isprintable() for c in text):
        raise SelectorInvalid(f"the selector {selector!r} is empty or contains blanks")
    if text.startswith("-"):
        raise SelectorInvalid(f"the selector {selector!r} is refused: it would read as an option")
    if text.startswith("@"):
        group = text[1:]
        if group == "all":
            names = {h.name for h in inventory.hosts}
        elif group == "ungrouped":
            names = {h.name for h in inventory.hosts if set(h.groups) <= {"ungrouped"}}
        else:
            names = {h.name for h in inventory.hosts if group in h.groups}
        if not names:
            known = ", ".join(f"@{g}" for g in inventory.groups) or "none"
            raise SelectorUnmatched(f"no host is in the group {group!r} (groups: {known})")
        return names
    if _GLOB & set(text) and not text.startswith("[") and "@[" not in text:  # [v6addr]:port is an address
        names = {h.name for h in inventory.hosts if fnmatch.fnmatchcase(h.name, text)}
        if not names:
            raise SelectorUnmatched(f"the pattern {text!r} matches no host of the inventory ({_count(inventory)})")
        return names
    if inventory.get(text) is not None:
        return {text}
    if "@" in text or ":" in text or _is_ip(text):
        return _address_host(inventory, text)
    raise SelectorUnmatched(
        f"no host named {text!r} in the inventory ({_count(inventory)}); "
        f"for a host in no inventory write user@{text} or {text}:22"
    )


def parse_address(text: str) -> tuple[str | None, str, int | None]:
    """``user@host:port``, ``[v6addr]:port``, ``host:port``, ``user@host`` or a bare IPv6 address
    as ``(user, host, port)``.

    :raises SelectorInvalid: brackets not closed, a port that is not 1-65535, an empty part, or
        one that starts with ``-``.
    """
    user, at, rest = text.rpartition("@")
    port: int | None = None
    if rest.startswith("["):
        host, bracket, tail = rest[1:].partition("]")
        if not bracket or (tail and not tail.startswith(":")):
            raise SelectorInvalid(f"the address {text!r} is not well formed")
        port = _port(tail[1:], text) if tail else None
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
        port = _port(port_text, text)
    else:
        host = rest
    if not host or host.startswith("-") or (at and (not user or user.startswith("-"))):
        raise SelectorInvalid(f"the address {text!r} is refused: a part is empty or would read as an option")
    return (user or None), host, port


def _address_host(inventory: Inventory, text: str) -> Host:
    user, host, port = parse_address(text)
    known = inventory.get(host)
    if known is not None:  # build-1 from the inventory, as another user or on another port
        update = {k: v for k, v in (("user", user), ("port", port)) if v is not None}
        # Named as written: alice@build-1 and bob@build-1 are two checks, two rows, two sessions;
        # still reached at the inventory host's address, or by its own name (an ssh_config alias).
        return known.replace(**update, name=text, address=known.address or host) if update else known
    # The selector's checks and parse_address's leave only the length to check (a name longer
    # than any host name), so pydantic stays unloaded for a host given on the command line.
    if len(text) > MAX_NAME:
        raise SelectorInvalid(f"the address {text[:40]!r}... is refused: longer than {MAX_NAME} characters")
    return Host(name=text, address=host, user=user, port=port, sources=("selector",))


def _port(text: str, whole: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        raise SelectorInvalid(f"the address {whole!r} has an invalid port")
    return int(text)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _count(inventory: Inventory) -> str:
    return "empty" if not inventory.hosts else f"{len(inventory.hosts)} hosts"

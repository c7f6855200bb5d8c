"""The inventory's data: hosts and the merged view of them, as frozen pydantic models.

A :class:`Host` remembers which of its fields a source set (pydantic's ``model_fields_set``), so
merging sources can tell "this file says capacity 1" from "this file says nothing about
capacity": a field a higher-precedence source leaves unset is taken from the next source.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

__all__ = ["DEFAULT_CAPACITY", "Host", "Inventory"]

DEFAULT_CAPACITY: Final = 1
"""Agents a host runs at once unless its inventory says otherwise. One, because a coding agent
with its builds and tests easily fills a build host; a larger host says so (``capacity: 4``)."""


def _name(text: str) -> str:
    # A space is the one blank str.isprintable() lets through.
    if text.startswith("-") or not text.isprintable() or " " in text:
        raise ValueError("must be printable, without blanks, and not start with '-'")
    return text


Name = Annotated[str, StringConstraints(min_length=1, max_length=255), AfterValidator(_name)]
"""A host name, group or alias: printable, no blanks, not starting with ``-`` (it would read as
an ssh option)."""


class Host(BaseModel):
    """One host the fleet may use.

    ``name`` is how selectors and reports call it; ``address`` is what to connect to (``None``:
    the name itself, which ssh also resolves through ssh_config aliases). ``ssh_options`` are
    ssh_config keywords for this host only (``ProxyJump``, ``UserKnownHostsFile``...).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    name: Name
    address: Name | None = None
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    user: Name | None = None
    identity_file: Annotated[str, StringConstraints(min_length=1)] | None = None
    groups: tuple[Name, ...] = ()
    labels: dict[str, str] = Field(default_factory=dict)
    capacity: Annotated[int, Field(ge=1, le=10_000)] = DEFAULT_CAPACITY
    ssh_options: dict[Name, str] = Field(default_factory=dict)
    sources: tuple[str, ...] = ()
    """Where the host's fields came from, highest precedence first (file paths)."""

    @property
    def destination(self) -> str:
        """The host as ssh's destination: ``user@address:port`` (``[v6]:port``), parts left out when unset."""
        host = self.address or self.name
        at = f"{self.user}@" if self.user else ""
        if self.port is None:
            return f"{at}{host}"
        if ":" in host:
            host = f"[{host}]"
        return f"{at}{host}:{self.port}"

    def to_json(self) -> dict[str, object]:
        """Stable keys, every field present (``null`` when unset), for one JSON object per host."""
        return {
            "name": self.name,
            "address": self.address,
            "port": self.port,
            "user": self.user,
            "identity_file": self.identity_file,
            "groups": list(self.groups),
            "labels": dict(self.labels),
            "capacity": self.capacity,
            "ssh_options": dict(self.ssh_options),
            "destination": self.destination,
            "sources": list(self.sources),
        }


class Inventory(BaseModel):
    """Hosts in inventory order (names unique), and notes about what a source left out and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hosts: tuple[Host, ...] = ()
    notes: tuple[str, ...] = ()

    def get(self, name: str) -> Host | None:
        """The host called ``name``, or ``None``."""
        return next((h for h in self.hosts if h.name == name), None)

    @property
    def groups(self) -> tuple[str, ...]:
        """Every group some host belongs to, in order of first appearance."""
        return tuple(dict.fromkeys(g for h in self.hosts for g in h.groups))

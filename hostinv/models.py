"""The inventory's data: hosts and the merged view of them, as frozen dataclasses.

They are plain dataclasses, not pydantic models, so that an inventory kept on disk
(:mod:`hostinv.inventory.cache`) comes back without loading pydantic: its import and the
building of its validators cost a quarter of a second, more than the rest of a fleet command's
start. Values from a file are validated by :meth:`Host.from_fields` (pydantic, loaded there).

:class:`Host` is the one declaration of a host's fields: name, type, default, and (in each
field's ``metadata``) what a source may give for it. The validator (:mod:`hostinv._host_fields`),
our file's schema (:mod:`hostinv.inventory.own_file`), the JSON form and the kept form are all
derived from it, so a field is added or changed here and nowhere else.

A :class:`Host` remembers which of its fields a source set (:attr:`Host.fields_set`), so
merging sources can tell "this file says capacity 1" from "this file says nothing about
capacity": a field a higher-precedence source leaves unset is taken from the next source.

What a host's fields hold is passed to ``ssh`` as overrides of the user's ssh_config (``-p``,
``-l``, ``-o``, a generated ``Host`` block read before it). So only our own file and Ansible
inventories set them; what the ssh_config's ``Host`` blocks say of an alias is kept apart, in
:attr:`Host.from_ssh_config`, for display: such a host is reached by its alias, and ssh applies
its config itself, ``Match`` blocks and all, as the user's own ``ssh lab1`` would.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["DEFAULT_CAPACITY", "HOST_FIELDS", "MAX_NAME", "SETTINGS", "Host", "Inventory"]

DEFAULT_CAPACITY: Final = 1
"""Agents a host runs at once unless its inventory says otherwise. One, because a coding agent
with its builds and tests easily fills a build host; a larger host says so (``capacity: 4``)."""
MAX_NAME: Final = 255
"""The longest host name, group, alias or user a source may give (longer than any DNS name)."""

# What a source may give for a field, in the field's ``metadata``; :meth:`Host.from_fields`
# checks it (:mod:`hostinv._host_fields`). A field with none takes any value of its type.
_NAME: Final = {"name": MAX_NAME}
"""Each text it holds (the value, each item, each key) is a name: printable, without blanks, not
starting with ``-`` (it would read as an ssh option), 1 to ``MAX_NAME`` characters."""
_PORT: Final = {"range": (1, 65535)}
_CAPACITY: Final = {"range": (1, 10_000)}
_PATH: Final = {"nonempty": True}
_SSH_OPTIONS: Final = {**_NAME, "ssh_options": True}
"""Names as keys, each an ssh_config keyword and no block or file of its own, each value one line."""


@dataclass(frozen=True)
class Host:
    """One host the fleet may use.

    ``name`` is how selectors and reports call it; ``address`` is what to connect to (``None``:
    the name itself, which ssh also resolves through ssh_config aliases). ``ssh_options`` are
    ssh_config keywords for this host only (``ProxyJump``, ``UserKnownHostsFile``...).
    ``address``, ``port``, ``user``, ``identity_file`` and ``ssh_options`` override the user's
    ssh_config; :attr:`from_ssh_config` never does.

    Built directly, nothing is checked; :meth:`from_fields` validates what a source read.
    """

    name: str = field(metadata=_NAME)
    address: str | None = field(default=None, metadata=_NAME)
    port: int | None = field(default=None, metadata=_PORT)
    user: str | None = field(default=None, metadata=_NAME)
    identity_file: str | None = field(default=None, metadata=_PATH)
    groups: tuple[str, ...] = field(default=(), metadata=_NAME)
    labels: dict[str, str] = field(default_factory=dict)
    capacity: int = field(default=DEFAULT_CAPACITY, metadata=_CAPACITY)
    ssh_options: dict[str, str] = field(default_factory=dict, metadata=_SSH_OPTIONS)
    from_ssh_config: dict[str, str] = field(default_factory=dict)
    """What the ssh_config's ``Host`` blocks say of this alias (``address`` for HostName,
    ``port``, ``user``, the first ``identity_file``), as text, for display only: ssh reads them
    itself when given the alias, with what no reading here decides (``Match`` blocks), so no
    path turns them into overrides."""
    sources: tuple[str, ...] = ()
    """Where the host's fields came from, highest precedence first (file paths)."""
    fields_set: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    """The fields its source set. Left empty, the name and every field that is not at its default."""

    def __post_init__(self) -> None:
        if not self.fields_set:
            given = {"name", *(k for k, v in _DEFAULTS.items() if getattr(self, k) != v)}
            object.__setattr__(self, "fields_set", frozenset(given))

    @classmethod
    def from_fields(cls, fields: Mapping[str, object]) -> Host:
        """A host from a source's values, validated: names printable, without blanks and not
        starting with ``-`` (it would read as an ssh option), port 1-65535, capacity 1-10000,
        no unknown field; strings stripped. ``fields_set`` is the keys given.

        :raises pydantic.ValidationError: a value is refused (``loc`` names the field).
        """
        # Here, not above: pydantic loads with the validator, and only a source being read needs it.
        from ._host_fields import validated

        return cls(**validated(cls, _GIVEN, fields))

    def replace(self, **changes: Any) -> Host:
        """A copy with ``changes`` (not validated), which count as set by its source."""
        return dataclasses.replace(self, **changes, fields_set=self.fields_set | changes.keys())

    def set_values(self) -> dict[str, object]:
        """The fields its source set, as JSON values (lists for tuples)."""
        return {k: _plain(getattr(self, k)) for k in HOST_FIELDS if k in self.fields_set}

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

    @property
    def ssh_config_destination(self) -> str | None:
        """What the ssh_config's ``Host`` blocks make of the alias (``user@hostname:port``, our
        own ``user`` and ``port`` first), for display; ``None`` when they say nothing of it or the
        host is not reached by its alias (another source set its ``address``). ``Match`` blocks
        are not read: ssh may still decide otherwise."""
        seen = self.from_ssh_config
        if self.address is not None or not seen.keys() & {"address", "port", "user"}:
            return None
        port = self.port if self.port is not None else seen.get("port", "")
        user = self.user or seen.get("user")
        shown = Host(self.name, seen.get("address"), int(port) if str(port).isdigit() else None, user)
        return shown.destination

    def to_json(self) -> dict[str, object]:
        """Stable keys, every field present (``null`` when unset) and ``destination`` before
        ``sources``, for one JSON object per host."""
        shown: dict[str, object] = {k: _plain(getattr(self, k)) for k in HOST_FIELDS if k != "sources"}
        return {**shown, "destination": self.destination, "sources": list(self.sources)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], fields_set: frozenset[str] = frozenset()) -> Host:
        """The host :meth:`to_json` gave ``data`` for (not validated: it was when first read).

        :raises TypeError: a key that is no field, or a field missing.
        """
        values: dict[str, Any] = {k: tuple(v) if k in _TUPLES else v for k, v in data.items() if k != "destination"}
        return cls(**values, fields_set=fields_set)


HOST_FIELDS: Final = tuple(f.name for f in dataclasses.fields(Host) if f.name != "fields_set")
"""The fields a source may set, in declaration order."""
SETTINGS: Final = tuple(k for k in HOST_FIELDS if k not in ("name", "from_ssh_config", "sources"))
"""How a host is reached and used: the fields our inventory file sets for a host (not its name,
nor what the ssh_config says of it, nor where it came from)."""
_GIVEN: Final = ("name", *SETTINGS, "sources")
"""The fields :meth:`Host.from_fields` takes: ``from_ssh_config`` is shown, never given."""
_TUPLES: Final = frozenset(f.name for f in dataclasses.fields(Host) if isinstance(f.default, tuple))
_DEFAULTS: Final[dict[str, object]] = {
    f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    for f in dataclasses.fields(Host)
    if f.name not in ("name", "fields_set")
}


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, dict) else value


@dataclass(frozen=True)
class Inventory:
    """Hosts in inventory order (names unique), and notes about what a source left out and why."""

    hosts: tuple[Host, ...] = ()
    notes: tuple[str, ...] = ()

    def get(self, name: str) -> Host | None:
        """The host called ``name``, or ``None``."""
        return next((h for h in self.hosts if h.name == name), None)

    @property
    def groups(self) -> tuple[str, ...]:
        """Every group some host belongs to, in order of first appearance."""
        return tuple(dict.fromkeys(g for h in self.hosts for g in h.groups))

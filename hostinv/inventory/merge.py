"""One view of several inventory sources, with a fixed precedence.

Sources are given highest precedence first (the CLI's order: our own file, then the Ansible
inventories it names, then the ssh_config). A host named in several sources is one host: each
field comes from the first source that sets it; ``groups`` are the union (in that order);
``labels``, ``ssh_options`` and ``from_ssh_config`` are merged key by key, the first source winning a key; ``sources``
lists every file that named the host. Hosts keep the order in which the sources, walked in
precedence order, first name them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Final

from ..models import Host, Inventory

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["merge"]

# How a field merges follows from its type in Host: a tuple's items are joined, a mapping's keys merged.
_UNION: Final = frozenset(f.name for f in dataclasses.fields(Host) if isinstance(f.default, tuple))
_BY_KEY: Final = frozenset(f.name for f in dataclasses.fields(Host) if f.default_factory is dict)


def merge(sources: Sequence[Inventory]) -> Inventory:
    """The merged view of ``sources`` (highest precedence first), their notes kept in order."""
    fields: dict[str, dict[str, Any]] = {}
    for inventory in sources:
        for host in inventory.hosts:
            into = fields.setdefault(host.name, {"name": host.name})
            for key in host.fields_set - {"name"}:
                value = getattr(host, key)
                if key in _UNION:
                    into[key] = tuple(dict.fromkeys([*into.get(key, ()), *value]))
                elif key in _BY_KEY:
                    into[key] = {**value, **into.get(key, {})}
                else:
                    into.setdefault(key, value)
    # Every value was validated by its source: the merged host is built as it is.
    hosts = tuple(Host(**f, fields_set=frozenset(f)) for f in fields.values())
    return Inventory(hosts=hosts, notes=tuple(note for inventory in sources for note in inventory.notes))

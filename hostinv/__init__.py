"""hostinv: the hosts of a fleet, from the files operators already keep.

It reads our own inventory file, the ``Host`` entries of an OpenSSH config and Ansible
inventories (INI and YAML) into one merged view of :class:`Host` records, and resolves the
selectors fleet commands take (``@group``, ``build-*``, a name, ``user@host:port``).

It knows nothing of the Agent Client Protocol and never imports ``remote_acp``: ``remote_acp``
builds on it, not the other way round. The names below are imported on first use: a session
that only needs :mod:`hostinv.resolve_cache` loads neither pydantic nor YAML; an inventory
reused from its cache (:mod:`hostinv.inventory.cache`) loads neither either; and asyncssh,
needed only to probe hosts, is imported where a probe runs.
"""

from __future__ import annotations

import logging

from .lazy import lazy_exports

# The convention for libraries: an application that configured no logging gets no output from us
# (without any handler, ``logging.lastResort`` prints warnings to stderr).
logging.getLogger(__name__).addHandler(logging.NullHandler())

# Not typing.TYPE_CHECKING: importing typing would be much of what ``import hostinv`` costs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .errors import HostinvError, InventoryInvalid, InventoryUnreadable, SelectorInvalid, SelectorUnmatched
    from .inventory import (
        dump_inventory_yaml,
        load_ansible,
        load_inventory,
        load_ssh_config,
        merge,
        parse_ansible,
        parse_inventory_yaml,
        parse_ssh_config,
    )
    from .models import DEFAULT_CAPACITY, Host, Inventory
    from .selectors import parse_address, select

__all__ = (
    "DEFAULT_CAPACITY",
    "Host",
    "HostinvError",
    "Inventory",
    "InventoryInvalid",
    "InventoryUnreadable",
    "SelectorInvalid",
    "SelectorUnmatched",
    "dump_inventory_yaml",
    "load_ansible",
    "load_inventory",
    "load_ssh_config",
    "merge",
    "parse_address",
    "parse_ansible",
    "parse_inventory_yaml",
    "parse_ssh_config",
    "select",
)

_HOME = {
    **dict.fromkeys(
        ("HostinvError", "InventoryInvalid", "InventoryUnreadable", "SelectorInvalid", "SelectorUnmatched"), "errors"
    ),
    **dict.fromkeys(
        (
            "dump_inventory_yaml",
            "load_ansible",
            "load_inventory",
            "load_ssh_config",
            "merge",
            "parse_ansible",
            "parse_inventory_yaml",
            "parse_ssh_config",
        ),
        "inventory",
    ),
    **dict.fromkeys(("DEFAULT_CAPACITY", "Host", "Inventory"), "models"),
    **dict.fromkeys(("parse_address", "select"), "selectors"),
}

# For the interpreter only: a type checker sees just the names imported above, so a misspelt
# attribute of the package is an error rather than an ``object``.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _HOME, globals())

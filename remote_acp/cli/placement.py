"""``remote-acp run --host SELECTOR``: which hosts a run may be placed on, read from the inventory.

``--host`` names a fleet selection when it is ``@group`` or a glob (``build-*``), and a host of
the operator's inventory when the inventory file (``--inventory``, ``$REMOTE_ACP_INVENTORY`` or
the default file, when it exists) names it: then the run is placed through a
:class:`~remote_acp.fleet.HostPool`, with each host's settings and capacity. Anything else is an
ssh destination as it is, which keeps the plain ``--host`` start from loading the inventory at all.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

import click

import hostinv
from hostinv.inventory import default_inventory_path

from ..paths import cache_base
from .local_files import as_path, read_inventory

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = ["fleet_hosts", "is_selection", "load_merged", "selected_hosts"]

_GLOB: Final = frozenset("*?[")


def is_selection(text: str) -> bool:
    """Whether ``--host`` names a selection (``@group``, a glob) rather than one destination."""
    return text.startswith("@") or bool(_GLOB & set(text))


def fleet_hosts(
    text: str, inventory_file: str | None, ssh_config: str | None, ansible: Sequence[str] = ()
) -> list[hostinv.Host] | None:
    """The inventory hosts ``text`` selects, or ``None`` when it is a plain destination.

    :raises click.UsageError: a selection that matches no host, or is malformed.
    :raises InventoryFileError: an inventory file that cannot be read (exit status 10).
    """
    selection = is_selection(text)
    if not selection and ansible:  # a name of the Ansible inventory given: the merged view knows it
        merged = read_inventory(lambda: load_merged(inventory_file, ssh_config, ansible))
        found = merged.get(text)
        return None if found is None else [found]
    if not selection:
        if inventory_file is None:
            own, _ = default_inventory_path()
            if not os.path.exists(own):
                return None
        keep_in = _kept_inventories()
        named = read_inventory(
            lambda: hostinv.load_inventory(as_path(inventory_file), use_ssh_config=False, keep_in=keep_in)
        )
        found = named.get(text)
        return None if found is None else [found]
    return selected_hosts([text], inventory_file, ssh_config, ansible)


def selected_hosts(
    selectors: Sequence[str], inventory_file: str | None, ssh_config: str | None, ansible: Sequence[str] = ()
) -> list[hostinv.Host]:
    """The hosts of the merged inventory that ``selectors`` name together (a workflow's
    ``worker.ssh_hosts``, or one selection).

    :raises click.UsageError: a selector that matches no host, or is malformed.
    :raises InventoryFileError: an inventory file that cannot be read (exit status 10).
    """
    merged = read_inventory(lambda: load_merged(inventory_file, ssh_config, ansible))
    try:
        return hostinv.select(merged, list(selectors))
    except hostinv.HostinvError as exc:
        raise click.UsageError(str(exc)) from None


def load_merged(inventory_file: str | None, ssh_config: str | None, ansible: Sequence[str] = ()) -> hostinv.Inventory:
    """The merged inventory, with ``ssh_config`` as ``ssh -F`` takes it (``none``: no ssh_config)
    and the Ansible inventories ``ansible`` (``--ansible``), kept under the cache directory's
    ``inventory`` while nothing it was read from changes."""
    keep_in = _kept_inventories()
    if ssh_config is not None and ssh_config.lower() == "none":
        return hostinv.load_inventory(as_path(inventory_file), use_ssh_config=False, ansible=ansible, keep_in=keep_in)
    return hostinv.load_inventory(
        as_path(inventory_file), ssh_config=as_path(ssh_config), ansible=ansible, keep_in=keep_in
    )


def _kept_inventories() -> Path:
    """Where the merged views are kept: the cache directory's ``inventory``."""
    return cache_base() / "inventory"

"""Where ``remote-acp run`` starts on a host: one ssh destination as it is, or the best ready host
of the inventory hosts a selection names (placed through a :class:`~remote_acp.fleet.HostPool`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..errors import RemoteAcpError
from ..targets.ssh.settings import SshSettings
from ..targets.ssh.target import SshTarget
from .local_files import LocalIoError
from .placement import fleet_hosts, is_selection, selected_hosts

if TYPE_CHECKING:
    from ..config import Workflow
    from ..fleet.pool import HostPool

__all__ = ["remote_start"]


def remote_start(
    selectors: tuple[str, ...],
    ssh_given: dict[str, Any],
    workflow: Workflow | None,
    *,
    workspace: str | None,
    named_by: str,
    resume: str | None,
    inventory: tuple[str | None, str | None, tuple[str, ...]],
) -> tuple[SshTarget | None, HostPool | None]:
    """The ssh target of a run on the host ``selectors`` names, or the pool that places it on one
    of the hosts they select: ``(target, None)`` or ``(None, pool)``.

    ``ssh_given`` holds the ssh flags (``None``: not given, the workflow's or the default then),
    ``named_by`` what named the hosts (for the messages), ``inventory`` the inventory file, the
    ssh_config and the Ansible inventories the selection reads.

    :raises click.UsageError: bad ssh settings, no workspace, a selection that matches nothing,
        or ``--resume`` with a selection.
    :raises LocalIoError: an inventory file, or where inventories are kept, cannot be used.
    """
    try:
        if workflow is not None:
            settings = workflow.ssh_settings(**ssh_given)
        else:
            settings = SshSettings(**{k: v for k, v in ssh_given.items() if v is not None})
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if not workspace:
        raise click.UsageError(f"--workspace is required with {named_by} (a directory on that host)")
    inventory_file, ssh_config, ansible = inventory
    try:
        if len(selectors) == 1:
            hosts = fleet_hosts(selectors[0], inventory_file, ssh_config, ansible)
        else:
            hosts = selected_hosts(selectors, inventory_file, ssh_config, ansible)
    except RemoteAcpError as exc:  # the cache where inventories are kept cannot be trusted
        raise LocalIoError(str(exc)) from None
    if hosts is None:
        return SshTarget(selectors[0], settings), None
    if resume is not None and (len(selectors) > 1 or is_selection(selectors[0])):
        raise click.UsageError("--resume continues a session on its own host: give that host, not a selection")
    # Seam: the pool (placement across the fleet, about 15 ms more of imports) loads only for hosts
    # of the inventory; a plain destination starts without it.
    from ..fleet.pool import HostPool

    return None, HostPool(hosts, settings=settings)

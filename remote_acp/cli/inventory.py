"""``remote-acp inventory``: the merged host inventory, listed and imported.

hostinv loads each source's parser (pydantic, YAML) only when that source is read, and rich loads
only for the table a person reads (see :mod:`.inventory_table`).

Exit status: 0 done; 2 usage (a selector that is malformed or matches nothing); 10 an inventory
file cannot be read or written (missing when named, invalid, or an import that would replace an
existing file without ``--force``); 141 the output was closed.
"""

from __future__ import annotations

from pathlib import Path

import click

import hostinv
from hostinv.inventory import default_inventory_path, write_text

from .jsonl import json_line
from .local_files import InventoryFileError, as_path, emit, output_gone, print_notes, read_inventory
from .params import PATH

__all__ = ["inventory"]


def _inventory_option(f: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--inventory",
        "inventory_file",
        type=PATH,
        default=None,
        help="Our inventory file [$REMOTE_ACP_INVENTORY, else inventory.yaml in the user config directory].",
    )(f)


@click.group()
def inventory() -> None:
    """The hosts fleet commands can use: our inventory file, merged with the ssh_config's Host
    entries and Ansible inventories.

    Precedence, field by field: our file, then the Ansible inventories (those it lists under
    `ansible:`, then --ansible), then the ssh_config.
    """


@inventory.command("list")
@click.argument("selectors", nargs=-1)
@_inventory_option
@click.option(
    "--ssh-config", type=PATH, default=None, help="An ssh_config file instead of ~/.ssh/config (none: no file)."
)
@click.option("--no-ssh-config", is_flag=True, help="Leave the ssh_config's hosts out.")
@click.option(
    "--ansible", type=PATH, multiple=True, help="Also merge this Ansible inventory (INI or YAML). Repeatable."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per host, stable keys.")
def list_hosts(
    selectors: tuple[str, ...],
    inventory_file: str | None,
    ssh_config: str | None,
    no_ssh_config: bool,
    ansible: tuple[str, ...],
    as_json: bool,
) -> None:
    """Show the hosts SELECTORS name (default: every host), in inventory order.

    A selector is @group (@all), a glob (build-*), a host name or ssh_config alias, or
    user@host[:port] / [v6addr]:port for a host in no inventory.

    A host of the ssh_config alone is reached by its alias, so ssh applies the config itself
    (Match blocks too); the destination column shows, in parentheses, what its Host blocks say.
    """
    # As ssh -F takes it (and check host): none is no ssh_config, not a file called none.
    no_file = ssh_config is not None and ssh_config.lower() == "none"
    merged = read_inventory(
        lambda: hostinv.load_inventory(
            as_path(inventory_file),
            ssh_config=None if no_file else as_path(ssh_config),
            use_ssh_config=not (no_ssh_config or no_file),
            ansible=[Path(a) for a in ansible],
        )
    )
    try:
        hosts = hostinv.select(merged, selectors) if selectors else list(merged.hosts)
    except hostinv.HostinvError as exc:
        raise click.UsageError(str(exc)) from None
    print_notes(merged)
    if as_json:
        emit("".join(json_line(h.to_json()) + "\n" for h in hosts))
        return
    if not hosts:
        emit("no hosts in the inventory yet (see `remote-acp inventory import`)\n")
        return
    # Seam: rich (20-30 ms) loads only for the table a person reads; JSON output never loads it.
    from .inventory_table import print_hosts

    try:
        print_hosts(hosts)
    except BrokenPipeError:
        output_gone()


@inventory.group("import")
def import_() -> None:
    """Write our inventory file from another source (refuses to replace one without --force)."""


@import_.command("ansible")
@click.argument("source", type=PATH)
@_inventory_option
@click.option("--force", is_flag=True, help="Replace an existing inventory file.")
def import_ansible(source: str, inventory_file: str | None, force: bool) -> None:
    """Import the hosts of the Ansible inventory SOURCE (INI or YAML): groups, addresses, ports,
    users, keys, and capacity from remote_acp_capacity."""
    path = Path(source)
    _write(read_inventory(lambda: hostinv.load_ansible(path)), path, as_path(inventory_file), force, "ansible")


@import_.command("ssh-config")
@click.argument("source", type=PATH, required=False)
@_inventory_option
@click.option("--force", is_flag=True, help="Replace an existing inventory file.")
def import_ssh_config(source: str | None, inventory_file: str | None, force: bool) -> None:
    """Import the Host aliases (without wildcards) of SOURCE [~/.ssh/config], Include followed.

    Only the names are written: each host is reached by its alias, so ssh goes on applying
    the ssh_config (Match blocks too) rather than values copied out of it."""
    path = Path(source) if source is not None else Path.home() / ".ssh" / "config"
    _write(read_inventory(lambda: hostinv.load_ssh_config(path)), path, as_path(inventory_file), force, "ssh-config")


def _write(found: hostinv.Inventory, source: Path, inventory_file: Path | None, force: bool, kind: str) -> None:
    target = inventory_file if inventory_file is not None else default_inventory_path()[0]
    if target.exists() and not force:
        raise InventoryFileError(f"{target} exists; pass --force to replace it, or --inventory FILE to write elsewhere")
    print_notes(found)
    header = f"remote-acp inventory, imported from {source} (remote-acp inventory import {kind})"
    try:
        write_text(target, hostinv.dump_inventory_yaml(found, header=header))
    except OSError as exc:
        raise InventoryFileError(str(exc)) from None
    emit(f"wrote {len(found.hosts)} hosts to {target}\n")

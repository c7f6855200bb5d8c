"""``remote-acp inventory``: the merged host inventory, listed and imported.

Only click is imported here at start-up; ``hostinv`` (pydantic, yaml), rich and json load when a
sub-command runs, so ``remote-acp --version`` does not pay for them.

Exit status: 0 done; 2 usage (a selector that is malformed or matches nothing); 10 an inventory
file cannot be read or written (missing when named, invalid, or an import that would replace an
existing file without ``--force``); 141 the output was closed.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from .local_files import PATH as _PATH
from .local_files import InventoryFileError, as_path, emit, output_gone, print_notes, read_inventory

if TYPE_CHECKING:
    from pathlib import Path

    from hostinv import Inventory

__all__ = ["inventory"]


def _inventory_option(f: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--inventory",
        "inventory_file",
        type=_PATH,
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
    "--ssh-config", type=_PATH, default=None, help="An ssh_config file instead of ~/.ssh/config (none: no file)."
)
@click.option("--no-ssh-config", is_flag=True, help="Leave the ssh_config's hosts out.")
@click.option(
    "--ansible", type=_PATH, multiple=True, help="Also merge this Ansible inventory (INI or YAML). Repeatable."
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
    from pathlib import Path

    import hostinv

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
        from .jsonl import json_line

        emit("".join(json_line(h.to_json()) + "\n" for h in hosts))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ..masking import escape_control

    if not hosts:
        emit("no hosts in the inventory yet (see `remote-acp inventory import`)\n")
        return
    table = Table("host", "destination", "groups", "capacity", "labels", "from", box=None, pad_edge=False)
    for h in hosts:
        labels = " ".join(f"{k}={v}" for k, v in h.labels.items())
        origin = ", ".join(Path(s).name for s in h.sources)
        seen = h.ssh_config_destination
        destination = h.destination if seen is None else f"{h.destination} ({seen})"
        cells = (h.name, destination, ",".join(h.groups), str(h.capacity), labels, origin)
        # Text, not markup: a '[' in an address or a label is not a style tag; every cell quotes
        # a file, so a control character in one is shown escaped, never sent to the terminal.
        table.add_row(*(Text(escape_control(c)) for c in cells))
    try:
        # a pipe gets whole lines, not a table cut to 80 columns
        Console(width=None if sys.stdout.isatty() else 1000).print(table)
        sys.stdout.flush()
    except BrokenPipeError:
        output_gone()


@inventory.group("import")
def import_() -> None:
    """Write our inventory file from another source (refuses to replace one without --force)."""


@import_.command("ansible")
@click.argument("source", type=_PATH)
@_inventory_option
@click.option("--force", is_flag=True, help="Replace an existing inventory file.")
def import_ansible(source: str, inventory_file: str | None, force: bool) -> None:
    """Import the hosts of the Ansible inventory SOURCE (INI or YAML): groups, addresses, ports,
    users, keys, and capacity from remote_acp_capacity."""
    from pathlib import Path

    import hostinv

    path = Path(source)
    _write(read_inventory(lambda: hostinv.load_ansible(path)), path, as_path(inventory_file), force, "ansible")


@import_.command("ssh-config")
@click.argument("source", type=_PATH, required=False)
@_inventory_option
@click.option("--force", is_flag=True, help="Replace an existing inventory file.")
def import_ssh_config(source: str | None, inventory_file: str | None, force: bool) -> None:
    """Import the Host aliases (without wildcards) of SOURCE [~/.ssh/config], Include followed.

    Only the names are written: each host is reached by its alias, so ssh goes on applying
    the ssh_config (Match blocks too) rather than values copied out of it."""
    from pathlib import Path

    import hostinv

    path = Path(source) if source is not None else Path.home() / ".ssh" / "config"
    _write(read_inventory(lambda: hostinv.load_ssh_config(path)), path, as_path(inventory_file), force, "ssh-config")


def _write(found: Inventory, source: Path, inventory_file: Path | None, force: bool, kind: str) -> None:
    from hostinv.inventory import default_inventory_path, dump_inventory_yaml, write_text

    target = inventory_file if inventory_file is not None else default_inventory_path()[0]
    if target.exists() and not force:
        raise InventoryFileError(f"{target} exists; pass --force to replace it, or --inventory FILE to write elsewhere")
    print_notes(found)
    header = f"remote-acp inventory, imported from {source} (remote-acp inventory import {kind})"
    try:
        write_text(target, dump_inventory_yaml(found, header=header))
    except OSError as exc:
        raise InventoryFileError(str(exc)) from None
    emit(f"wrote {len(found.hosts)} hosts to {target}\n")

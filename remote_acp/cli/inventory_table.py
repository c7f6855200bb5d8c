"""The table ``inventory list`` prints for a person.

Its own module so that JSON output, which programs read, never loads rich (20-30 ms of a
command's start).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..masking import escape_control

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hostinv import Host

__all__ = ["print_hosts"]


def print_hosts(hosts: Sequence[Host]) -> None:
    """The inventory hosts on stdout, a row each (a pipe gets whole lines, not a table cut to 80
    columns). Every cell quotes a file, so it is text, not markup (a '[' in an address or a label
    is not a style tag), with control characters shown escaped."""
    table = Table("host", "destination", "groups", "capacity", "labels", "from", box=None, pad_edge=False)
    for h in hosts:
        labels = " ".join(f"{k}={v}" for k, v in h.labels.items())
        origin = ", ".join(Path(s).name for s in h.sources)
        seen = h.ssh_config_destination
        destination = h.destination if seen is None else f"{h.destination} ({seen})"
        cells = (h.name, destination, ",".join(h.groups), str(h.capacity), labels, origin)
        table.add_row(*(Text(escape_control(c)) for c in cells))
    Console(width=None if sys.stdout.isatty() else 1000).print(table)
    sys.stdout.flush()

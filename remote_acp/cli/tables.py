"""What a person reads of ``check host`` and ``inventory list``: rich tables, and the progress bar
of a check on a terminal.

Its own module so that JSON output, which programs read, never loads rich (20-30 ms of a
command's start).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..fleet.report import TABLE_COLUMNS, detail_lines, table_rows
from ..masking import escape_control

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hostinv import Host

    from ..fleet import HostCheck

__all__ = ["checks_progress", "checks_table", "checks_text", "print_hosts"]

_VERDICT_STYLES = {"ready": "green", "unreachable": "red", "auth_failed": "red", "interrupted": "red"}


def checks_table(checks: Sequence[HostCheck], interrupted: Sequence[Host] = ()) -> Table:
    """The summary table of the checks, then of the hosts an interrupt left unchecked (cells as
    text: a '[' in a message is no style tag; a narrow terminal folds cells, never cuts them)."""
    table = Table(box=None, pad_edge=False)
    for column in TABLE_COLUMNS:
        table.add_column(column, overflow="fold")
    rows = table_rows(checks) + [(h.name, "interrupted", *[""] * (len(TABLE_COLUMNS) - 2)) for h in interrupted]
    for row in rows:
        cells = [Text(cell) for cell in row]
        cells[1].stylize(_VERDICT_STYLES.get(row[1], "yellow"))
        table.add_row(*cells)
    return table


def checks_text(checks: Sequence[HostCheck], interrupted: Sequence[Host]) -> str:
    """The summary table (80 columns on a pipe, the terminal's width on one), then a line per
    host that is not ready and its fix, whole: a fix is copied and run as printed."""
    console = Console(width=None if sys.stdout.isatty() else 80, highlight=False, soft_wrap=False)
    with console.capture() as captured:
        console.print(checks_table(checks, interrupted))
    details = detail_lines(checks) + [f"{h.name} (interrupted): not checked" for h in interrupted]
    return captured.get() + "".join(line + "\n" for line in details)


def checks_progress(total: int) -> Progress:
    """A progress bar on stderr for ``total`` hosts, gone once stopped."""
    progress = Progress(
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    progress.add_task("hosts checked, 0 failing", total=total)
    return progress


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

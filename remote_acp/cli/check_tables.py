"""What a person reads of ``check host``: the summary table, the fixes, and the progress bar on a
terminal.

Its own module so that JSON output, which programs read, never loads rich (20-30 ms of a
command's start).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..fleet.report import TABLE_COLUMNS, detail_lines, table_rows

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hostinv import Host

    from ..fleet import HostCheck

__all__ = ["checks_progress", "checks_table", "checks_text"]

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

"""What every command does with the command's own local files and output: inventory files read
with their errors as exit status 10, a workflow file checked before anything runs, notes about
what was read, and stdout that a reader closed (exit 141).

Only click is imported at start-up; ``hostinv`` and the config machinery load when used, so
``remote-acp --version`` does not pay for them.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, NoReturn

import click

from .exit_codes import EXIT_BROKEN_PIPE, EXIT_LOCAL_IO

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from hostinv import Inventory

    from ..config import Workflow

__all__ = [
    "PATH",
    "InventoryFileError",
    "LocalIoError",
    "as_path",
    "checked_workflow",
    "emit",
    "output_gone",
    "print_notes",
    "read_inventory",
]

PATH = click.Path(dir_okay=False)
"""A file option's type: a str (pathlib would cost ``--version`` several milliseconds)."""


class LocalIoError(click.ClickException):
    """The command's own files could not be used (exit status 10, see ``exit_codes``)."""

    exit_code = EXIT_LOCAL_IO


class InventoryFileError(LocalIoError):
    """An inventory file cannot be read or written."""


def as_path(text: str | None) -> Path | None:
    from pathlib import Path

    return None if text is None else Path(text)


def read_inventory(read: Callable[[], Inventory]) -> Inventory:
    """``read()``, its file errors as exit status 10 with the message naming file, line and key
    (escaped: it may quote what the file holds)."""
    import hostinv

    from ..errors import RemoteAcpError
    from ..masking import escape_control

    try:
        return read()
    except (hostinv.InventoryInvalid, hostinv.InventoryUnreadable) as exc:
        raise InventoryFileError(escape_control(str(exc), keep_newlines=True)) from None
    except RemoteAcpError as exc:  # where merged views are kept cannot be trusted
        raise InventoryFileError(escape_control(str(exc))) from None


def print_notes(found: Inventory) -> None:
    """The inventory's notes on stderr, escaped: they quote what the files hold."""
    from ..masking import escape_control

    for note in found.notes:
        click.echo(f"note: {escape_control(note)}", err=True)


def emit(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        output_gone()


def output_gone() -> NoReturn:
    """Whoever read the output went away (``| head``): exit 141 without another failing flush at exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(EXIT_BROKEN_PIPE)


def checked_workflow(path: str) -> Workflow:
    """The checked workflow at ``path`` (its warnings logged); errors end the command, status 2."""
    from ..config import ConfigError, load_workflow

    if not os.path.exists(path):
        raise click.UsageError(f"no workflow file {path!r}")
    try:
        return load_workflow(path)
    except ConfigError as exc:
        raise click.UsageError(f"the workflow file has errors (nothing was started):\n{exc}") from None

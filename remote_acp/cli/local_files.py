"""What every command does with the command's own local files and output: inventory files read
with their errors as exit status 10, a workflow file checked before anything runs, notes about
what was read, and stdout that a reader closed (exit 141).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

import hostinv

from ..errors import RemoteAcpError
from ..masking import escape_control
from .exit_codes import EXIT_BROKEN_PIPE, EXIT_LOCAL_IO

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..config import Workflow

__all__ = [
    "InventoryFileError",
    "LocalIoError",
    "as_path",
    "checked_workflow",
    "discard_stdout",
    "emit",
    "output_gone",
    "print_notes",
    "read_inventory",
]


class LocalIoError(click.ClickException):
    """The command's own files could not be used (exit status 10, see ``exit_codes``)."""

    exit_code = EXIT_LOCAL_IO


class InventoryFileError(LocalIoError):
    """An inventory file cannot be read or written."""


def as_path(text: str | None) -> Path | None:
    return None if text is None else Path(text)


def read_inventory(read: Callable[[], hostinv.Inventory]) -> hostinv.Inventory:
    """``read()``, its file errors as exit status 10 with the message naming file, line and key
    (escaped: it may quote what the file holds)."""
    try:
        return read()
    except (hostinv.InventoryInvalid, hostinv.InventoryUnreadable) as exc:
        raise InventoryFileError(escape_control(str(exc), keep_newlines=True)) from None
    except RemoteAcpError as exc:  # where merged views are kept cannot be trusted
        raise InventoryFileError(escape_control(str(exc))) from None


def print_notes(found: hostinv.Inventory) -> None:
    """The inventory's notes on stderr, escaped: they quote what the files hold."""
    for note in found.notes:
        click.echo(f"note: {escape_control(note)}", err=True)


def emit(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        output_gone()


def discard_stdout() -> None:
    """Keep the interpreter's final flush from failing again on a closed or full stdout."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no stdout at all
        pass


def output_gone() -> NoReturn:
    """Whoever read the output went away (``| head``): exit 141 without another failing flush at exit."""
    discard_stdout()
    sys.exit(EXIT_BROKEN_PIPE)


def checked_workflow(path: str) -> Workflow:
    """The checked workflow at ``path`` (its warnings logged); errors end the command, status 2."""
    # Seam: the configuration machinery (pydantic and YAML, about 80 ms) loads only when a
    # command is given a workflow file; a plain run or check starts without it.
    from ..config import ConfigError, load_workflow

    if not os.path.exists(path):
        raise click.UsageError(f"no workflow file {path!r}")
    try:
        return load_workflow(path)
    except ConfigError as exc:
        raise click.UsageError(f"the workflow file has errors (nothing was started):\n{exc}") from None

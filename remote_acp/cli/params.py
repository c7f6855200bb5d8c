"""What the command's options take: file paths as text, values without NUL bytes, a workspace
made absolute, a reattach window within its bound."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["PATH", "absolute_workspace", "no_nul", "reattach_window_option"]

FC = TypeVar("FC", bound="Callable[..., Any] | click.Command")

PATH = click.Path(dir_okay=False)
"""A file option's type: a file (not a directory), given to the command as the str it was typed."""


def no_nul(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Refuse a NUL byte in a value that becomes a path, a command or an environment name."""
    values = value if isinstance(value, tuple) else (value,)
    if any(isinstance(v, str) and "\x00" in v for v in values):
        raise click.BadParameter("must not contain a NUL byte", ctx=ctx, param=param)
    return value


def absolute_workspace(path: str | None) -> str:
    """``path`` (default: the current directory) made absolute; a usage error when it cannot be."""
    try:
        return os.path.abspath(path if path is not None else ".")
    except OSError as exc:  # a relative path (or none) while the current directory is gone
        what = f"the workspace {path!r}" if path is not None else "the workspace (the current directory)"
        raise click.UsageError(
            f"cannot resolve {what}: the current directory is unusable ({exc.strerror}); "
            "pass --workspace with an absolute path"
        ) from None


def reattach_window_option(help_text: str) -> Callable[[FC], FC]:
    """``--reattach-window SECONDS`` (into ``reattach_window``), 1 s to the settings' bound."""
    return click.option(
        "--reattach-window",
        "reattach_window",
        type=click.IntRange(min=1),
        default=None,
        metavar="SECONDS",
        callback=_reattach_window_bound,
        help=help_text,
    )


def _reattach_window_bound(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """Refuse a ``--reattach-window`` past the settings' bound, naming the flag."""
    if value is None:
        return None
    # Here, not at the top: only a command given the flag loads the ssh settings for their bound.
    from ..targets.ssh.settings import MAX_REATTACH_WINDOW_S

    if value > MAX_REATTACH_WINDOW_S:
        raise click.BadParameter(f"{value} is more than {MAX_REATTACH_WINDOW_S} seconds (7 days)", ctx=ctx, param=param)
    return value

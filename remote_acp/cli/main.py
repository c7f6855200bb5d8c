"""Entry point of the ``remote-acp`` command.

The command's import seam is here: :data:`COMMANDS` names the module of each sub-command, and
:class:`LazyGroup` imports it when that sub-command is named. ``--help`` lists the commands from
the table, so ``remote-acp --version`` and ``--help`` load click and nothing of the machinery,
and each command loads only its own modules, which import what they need at module level.
"""

from __future__ import annotations

import gc
import importlib
import sys
from typing import TYPE_CHECKING, Any, Final

import click

from .. import __version__
from .standard_fds import occupy_closed_std_fds, tolerant

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["COMMANDS", "LazyGroup", "cli", "main"]

COMMANDS: Final[Mapping[str, tuple[str, str]]] = {
    "attach": (
        "remote_acp.cli.attach_command:attach",
        "Take over SESSION, started with --reattach-window, whose run was stopped or detached.",
    ),
    "check": ("remote_acp.cli.check:check", "Check that hosts can run an agent."),
    "inventory": (
        "remote_acp.cli.inventory:inventory",
        "The hosts fleet commands can use: our inventory file, merged with the ssh_config's Host entries and "
        "Ansible inventories.",
    ),
    "run": (
        "remote_acp.cli.run_command:run",
        "Start AGENT in a session and run each PROMPT as one turn, in order.",
    ),
    "sessions": (
        "remote_acp.cli.sessions:sessions",
        "List recent sessions (newest first), to continue one with `run --resume ID`.",
    ),
    "validate": (
        "remote_acp.cli.validate:validate",
        "Check the workflow FILE (a YAML file, or a WORKFLOW.md's front matter) [./WORKFLOW.md].",
    ),
}
"""Each sub-command: where it is defined (``module:attribute``), and the first paragraph of its
help, which ``--help`` shortens as click does (a test holds it to the command's own)."""

LOG_LEVELS = click.Choice(["debug", "info", "warning", "error"], case_sensitive=False)


class LazyGroup(click.Group):
    """A group whose sub-commands are imported when named, from a table of ``name: (module:attribute,
    help)``; its help lists them from the table, without importing any."""

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attribute = self.lazy[cmd_name][0].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{module}:{attribute} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        if name[:1].isalnum() and name not in self.lazy and name not in self.commands and not ctx.resilient_parsing:
            # As click says it, with every command (loaded or not) among the close matches.
            raise click.NoSuchCommand(name, possibilities=self.list_commands(ctx), ctx=ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, self.command_help(name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def command_help(self, name: str, limit: int) -> str:
        """The command's line in ``--help``, from the table when it is not loaded."""
        command = self.commands.get(name) or click.Command(name, help=self.lazy[name][1])
        return command.get_short_help_str(limit)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="remote-acp")
@click.option("--log-level", type=LOG_LEVELS, default="warning", show_default=True, help="Log threshold (stderr).")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"], case_sensitive=False),
    default="text",
    show_default=True,
    help="Log line format.",
)
def cli(log_level: str, log_format: str) -> None:
    """Run coding agents that speak the Agent Client Protocol, locally or on build hosts."""
    # Seam: logging and the output buffers (json, the masking filter: about 5 ms) load once a command runs;
    # --version and --help end before this and load click alone.
    from .logging_setup import log_to_command_stderr

    tolerant(sys.stdout)  # an agent's lone surrogate in a listing is replaced, not fatal
    log_to_command_stderr(log_level, log_format)


def main() -> None:
    occupy_closed_std_fds()  # before anything opens a file or a pipe
    # A command runs once and exits: the cyclic collector would spend tens of milliseconds
    # walking the objects the imports create, and as much again at exit, to free nothing. It is
    # off while the command starts; what start-up built is then frozen out of its reach.
    gc.disable()
    try:
        cli(prog_name="remote-acp")
    finally:
        # The process ends here: what is left is freed at exit, and the collector's passes over
        # it while the interpreter shuts down (a quarter of a second after a fleet check) would
        # free nothing more. Frozen objects are out of their reach.
        gc.freeze()
        gc.enable()


if __name__ == "__main__":
    main()

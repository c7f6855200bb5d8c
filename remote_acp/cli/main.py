"""Entry point of the ``remote-acp`` command.

Sub-commands import their machinery when they run, so ``remote-acp --version`` and ``--help``
stay fast.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from .._version import __version__

if TYPE_CHECKING:
    from ..launch import LaunchTarget

__all__ = ["main"]

LOG_LEVELS = click.Choice(["debug", "info", "warning", "error"], case_sensitive=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="remote-acp")
@click.option("--log-level", type=LOG_LEVELS, default="warning", show_default=True, help="Log threshold (stderr).")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log line format.",
)
def cli(log_level: str, log_format: str) -> None:
    """Run coding agents that speak the Agent Client Protocol, locally or on build hosts."""
    from .logging_setup import configure_logging

    configure_logging(log_level, log_format)


@cli.command()
@click.option("--agent", "agent", required=True, help="Agent command with its protocol switch, e.g. 'qwen --acp'.")
@click.option(
    "--workspace",
    default=None,
    help="Directory the agent works in (absolute; default: the current directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line instead of text.")
@click.option("--read-timeout-ms", type=int, default=None, help="Bound of synchronous waits [5000].")
@click.option("--turn-timeout-ms", type=int, default=None, help="Bound of one turn [3600000].")
@click.option("--stall-timeout-ms", type=int, default=None, help="Longest gap between events [300000].")
@click.option("--stop-grace-ms", type=int, default=None, help="Graceful teardown window [5000].")
@click.option("--host", default=None, help="Run the agent on this host over ssh (alias, user@host, host:port).")
@click.option("--ssh-config", default=None, help="An ssh_config file to use instead of ~/.ssh/config.")
@click.option(
    "--host-key-policy",
    type=click.Choice(["accept-new", "yes", "no"]),
    default=None,
    help="StrictHostKeyChecking [accept-new, unless your ssh_config sets one]; 'no' needs --force-insecure-host-keys.",
)
@click.option("--force-insecure-host-keys", is_flag=True, help="Allow --host-key-policy no (warned at every start).")
@click.option("--connect-timeout", type=int, default=10, show_default=True, help="ssh ConnectTimeout, seconds.")
@click.option("--server-alive-interval", type=int, default=15, show_default=True, help="ssh keepalive, seconds.")
@click.option("--server-alive-count-max", type=int, default=3, show_default=True, help="Missed keepalives allowed.")
@click.option(
    "--ssh-pass-env",
    "pass_env",
    multiple=True,
    help="Carry this environment variable to the agent over stdin (never on argv). Repeatable.",
)
@click.option("--resume", default=None, help="Continue this saved session id ('last': the latest here).")
@click.option("--show-replay", is_flag=True, help="Print the history a continued session replays.")
@click.argument("prompts", nargs=-1, required=True)
def run(
    agent: str,
    workspace: str | None,
    as_json: bool,
    read_timeout_ms: int | None,
    turn_timeout_ms: int | None,
    stall_timeout_ms: int | None,
    stop_grace_ms: int | None,
    host: str | None,
    ssh_config: str | None,
    host_key_policy: str | None,
    force_insecure_host_keys: bool,
    connect_timeout: int,
    server_alive_interval: int,
    server_alive_count_max: int,
    pass_env: tuple[str, ...],
    resume: str | None,
    show_replay: bool,
    prompts: tuple[str, ...],
) -> None:
    """Start AGENT in a session and run each PROMPT as one turn, in order.

    Stops at the first turn that does not complete. Exit status: 0 all turns completed;
    3 bad command or workspace; 4 credential refused; 5 connection or protocol failure;
    6 retryable turn failure; 7 final turn failure (refusal, token limit, unknown outcome);
    8 cancelled; 9 the agent needs a person; 130 interrupted.
    """
    import anyio

    from ..options import SessionOptions
    from .exit_codes import EXIT_BROKEN_PIPE
    from .history import SessionHistory
    from .run import RunRequest, run_prompts

    bounds = {
        "read_timeout_ms": read_timeout_ms,
        "turn_timeout_ms": turn_timeout_ms,
        "stall_timeout_ms": stall_timeout_ms,
        "stop_grace_ms": stop_grace_ms,
    }
    try:
        options = SessionOptions(command=agent, **{k: v for k, v in bounds.items() if v is not None})
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    target: LaunchTarget | None = None
    if host is not None:
        from ..ssh import SshSettings, SshTarget

        try:
            settings = SshSettings(
                host_key_policy=host_key_policy,  # type: ignore[arg-type]
                force_insecure_host_keys=force_insecure_host_keys,
                config_file=ssh_config,
                connect_timeout_s=connect_timeout,
                server_alive_interval_s=server_alive_interval,
                server_alive_count_max=server_alive_count_max,
                pass_env=pass_env,
            )
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        target = SshTarget(host, settings)
        if not workspace:
            raise click.UsageError("--workspace is required with --host (a directory on that host)")
        where = workspace
    else:
        where = os.path.abspath(workspace) if workspace else os.getcwd()
    history = SessionHistory()
    if resume == "last":
        label = target.label if target is not None else "local"
        latest = history.recent(workspace=where, target=label, limit=1)
        if not latest:
            raise click.UsageError(f"no saved session for {where} on {label} to resume")
        resume = latest[0].session_id
    request = RunRequest(
        options=options,
        workspace=where,
        prompts=list(prompts),
        as_json=as_json,
        target=target,
        resume=resume,
        show_replay=show_replay,
        history=history,
    )
    code = anyio.run(run_prompts, request)
    if code == EXIT_BROKEN_PIPE:
        # Keep the interpreter's final flush from failing on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)


@cli.command()
@click.option("--workspace", default=None, help="Only sessions of this workspace.")
@click.option("--host", default=None, help="Only sessions on this host ('local' for local ones).")
@click.option("--limit", type=int, default=20, show_default=True, help="How many to list.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def sessions(workspace: str | None, host: str | None, limit: int, as_json: bool) -> None:
    """List recent sessions (newest first), to continue one with `run --resume ID`."""
    from .history import SessionHistory

    where = os.path.abspath(workspace) if workspace and host is None else workspace
    records = SessionHistory().recent(workspace=where, target=host, limit=limit)
    if as_json:
        import json

        for record in records:
            click.echo(json.dumps(record.to_json(), ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("session", "agent", "target", "workspace", "when", "outcome", "obtained", box=None)
    for r in records:
        outcome = f"{r.outcome} [{r.error_kind}]" if r.error_kind else r.outcome
        table.add_row(r.session_id, r.agent, r.target, r.workspace, r.when, outcome, r.obtained)
    Console().print(table if records else "no sessions recorded yet")


def main() -> None:
    cli(prog_name="remote-acp")


if __name__ == "__main__":
    main()

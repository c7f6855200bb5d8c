"""Entry point of the ``remote-acp`` command.

Sub-commands import their machinery when they run, so ``remote-acp --version`` and ``--help``
stay fast.
"""

from __future__ import annotations

import gc
import math
import os
import sys
from typing import TYPE_CHECKING, Any, Final

import click

from .._version import __version__
from .exit_codes import EXIT_BROKEN_PIPE, EXIT_LOCAL_IO
from .local_files import LocalIoError
from .streams import occupy_closed_std_fds, tolerant

if TYPE_CHECKING:
    from hostinv import Host

    from ..fleet.pool import HostPool
    from ..targets.launch import LaunchTarget

__all__ = ["main"]

LOG_LEVELS = click.Choice(["debug", "info", "warning", "error"], case_sensitive=False)


def _no_nul(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Refuse a NUL byte in a value that becomes a path, a command or an environment name."""
    values = value if isinstance(value, tuple) else (value,)
    if any(isinstance(v, str) and "\x00" in v for v in values):
        raise click.BadParameter("must not contain a NUL byte", ctx=ctx, param=param)
    return value


def _absolute(path: str | None) -> str:
    """``path`` (default: the current directory) made absolute; a usage error when it cannot be."""
    try:
        return os.path.abspath(path if path is not None else ".")
    except OSError as exc:  # a relative path (or none) while the current directory is gone
        what = f"the workspace {path!r}" if path is not None else "the workspace (the current directory)"
        raise click.UsageError(
            f"cannot resolve {what}: the current directory is unusable ({exc.strerror}); "
            "pass --workspace with an absolute path"
        ) from None


class _Commands(click.Group):
    """Sub-commands of their own module (``check``, ``inventory``, ``validate``) are imported only when named, so
    ``--version`` never loads them."""

    lazy: Final = {"check": ".check", "inventory": ".inventory", "validate": ".validate"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            import importlib

            command: click.Command = getattr(importlib.import_module(self.lazy[cmd_name], __package__), cmd_name)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
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
    from .logging_setup import configure_logging
    from .streams import standard_output

    tolerant(sys.stdout)  # an agent's lone surrogate in a listing is replaced, not fatal
    # Log lines go to stderr through the command's own buffer and writer thread: a write to a
    # stderr nobody reads must never block the event loop (and they stay in order with notices).
    configure_logging(log_level, log_format, standard_output().log_stream())


@cli.command()
@click.option(
    "--config",
    "config_file",
    default=None,
    callback=_no_nul,
    help="A workflow file (YAML, or a WORKFLOW.md whose body is the prompt); the flags below override it.",
)
@click.option(
    "--agent",
    "agent",
    default=None,
    callback=_no_nul,
    help="Agent command with its protocol switch, e.g. 'qwen --acp' (required without --config).",
)
@click.option(
    "--workspace",
    default=None,
    callback=_no_nul,
    help="Directory the agent works in (absolute; default: the current directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line instead of text.")
@click.option("--read-timeout-ms", type=int, default=None, help="Bound of synchronous waits [5000].")
@click.option("--turn-timeout-ms", type=int, default=None, help="Bound of one turn [3600000].")
@click.option("--stall-timeout-ms", type=int, default=None, help="Longest gap between events [300000].")
@click.option("--stop-grace-ms", type=int, default=None, help="Graceful teardown window [5000].")
@click.option(
    "--host",
    default=None,
    callback=_no_nul,
    help="Run the agent on this host over ssh (alias, user@host, host:port), or on the best ready host of a "
    "selection of the inventory (@group, a glob such as 'build-*', an inventory host name).",
)
@click.option(
    "--inventory",
    "inventory_file",
    default=None,
    callback=_no_nul,
    help="The inventory --host selects from [$REMOTE_ACP_INVENTORY, else inventory.yaml in the user config directory].",
)
@click.option(
    "--ansible",
    multiple=True,
    callback=_no_nul,
    help="Also select --host from this Ansible inventory (INI or YAML). Repeatable.",
)
@click.option(
    "--ssh-config", default=None, callback=_no_nul, help="An ssh_config file to use instead of ~/.ssh/config."
)
@click.option(
    "--host-key-policy",
    type=click.Choice(["accept-new", "yes", "no"], case_sensitive=False),
    default=None,
    help="StrictHostKeyChecking [accept-new, unless your ssh_config sets one]; 'no' needs --force-insecure-host-keys.",
)
@click.option("--force-insecure-host-keys", is_flag=True, help="Allow --host-key-policy no (warned at every start).")
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="ssh ConnectTimeout, seconds (ssh counts whole seconds: a fraction rounds up).",
)
@click.option("--server-alive-interval", type=int, default=15, show_default=True, help="ssh keepalive, seconds.")
@click.option("--server-alive-count-max", type=int, default=3, show_default=True, help="Missed keepalives allowed.")
@click.option(
    "--ssh-max-concurrent-starts",
    type=int,
    default=8,
    show_default=True,
    help="Sessions starting on one host at once in this process; more wait (sshd refuses past MaxStartups).",
)
@click.option(
    "--ssh-pass-env",
    "pass_env",
    multiple=True,
    callback=_no_nul,
    help="Carry this environment variable to the agent over stdin (never on argv). Repeatable.",
)
@click.option(
    "--wait-for-slot",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Placed runs: when every host of the selection is at capacity, wait up to this many seconds for a "
    "free agent slot instead of failing at once.",
)
@click.option("--resume", default=None, help="Continue this saved session id ('last': the latest here).")
@click.option("--show-replay", is_flag=True, help="Print the history a continued session replays.")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Send no further prompt once the run's measured tokens reach this total [agent.max_tokens]; "
    "an unmeasured run is not bounded by it (and says so).",
)
@click.argument("prompts", nargs=-1)
def run(
    config_file: str | None,
    agent: str | None,
    workspace: str | None,
    as_json: bool,
    read_timeout_ms: int | None,
    turn_timeout_ms: int | None,
    stall_timeout_ms: int | None,
    stop_grace_ms: int | None,
    host: str | None,
    inventory_file: str | None,
    ansible: tuple[str, ...],
    ssh_config: str | None,
    host_key_policy: str | None,
    force_insecure_host_keys: bool,
    connect_timeout: float,
    server_alive_interval: int,
    server_alive_count_max: int,
    ssh_max_concurrent_starts: int,
    pass_env: tuple[str, ...],
    wait_for_slot: float,
    resume: str | None,
    show_replay: bool,
    max_tokens: int | None,
    prompts: tuple[str, ...],
) -> None:
    """Start AGENT in a session and run each PROMPT as one turn, in order.

    With --config, the workflow file gives the agent, its bounds and where it runs (its
    worker.ssh_hosts: a host or a fleet selection); flags override it, and a WORKFLOW.md's body
    is the prompt when no PROMPT is given. A file with errors starts nothing (exit status 2).

    Stops at the first turn that does not complete (one that could not even start ends the run
    as turn_not_started), and before the next PROMPT once the measured tokens reach
    --max-tokens (token_ceiling_reached). Exit status: 0 all turns completed; 1 internal error;
    2 usage error; 3 bad command or workspace; 4 credential refused; 5 connection or protocol
    failure; 6 retryable turn failure; 7 final turn failure (refusal, token limit, unknown
    outcome, the token ceiling reached); 8 cancelled; 9 the agent needs a person; 10 local I/O
    failure (the output cannot be written, the session history cannot be read); 130
    interrupted; 141 the output was closed.
    """
    from ..targets.process.fork_server import prestart_launcher

    prestart_launcher()  # the supervisors' launcher starts beside the imports below, not after them
    import anyio

    from ..options import SessionOptions
    from .history import HistoryError, SessionHistory
    from .local_files import checked_workflow
    from .run import RunRequest, run_prompts

    workflow = checked_workflow(config_file) if config_file is not None else None
    if agent is None and workflow is None:
        raise click.UsageError("give the agent: --agent, or --config with a workflow file")
    if not prompts:
        if workflow is None or workflow.prompt is None:
            where = "; the workflow file has no prompt" if workflow is not None else ""
            raise click.UsageError(f"no PROMPT given{where}")
        prompts = (workflow.prompt,)
    bounds = {
        "read_timeout_ms": read_timeout_ms,
        "turn_timeout_ms": turn_timeout_ms,
        "stall_timeout_ms": stall_timeout_ms,
        "stop_grace_ms": stop_grace_ms,
    }
    try:
        given: dict[str, Any] = {k: v for k, v in bounds.items() if v is not None}
        if workflow is not None:
            options = workflow.session_options(command=agent, **given)
        else:
            assert agent is not None  # refused above
            options = SessionOptions(command=agent, **given)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    target: LaunchTarget | None = None
    pool: HostPool | None = None
    history = SessionHistory()
    agent_words = options.command if isinstance(options.command, str) else " ".join(options.command)
    if resume is not None and resume != "last":
        from .resume import resumed_where

        host, workspace = resumed_where(history, resume, host, workspace, workflow)
    selectors: tuple[str, ...] = (host,) if host is not None else workflow.ssh_hosts if workflow is not None else ()
    if selectors:
        from ..targets.ssh.settings import SshSettings
        from ..targets.ssh.target import SshTarget

        ssh_given: dict[str, Any] = {
            "host_key_policy": host_key_policy,
            "force_insecure_host_keys": force_insecure_host_keys or None,
            "config_file": ssh_config,
            "connect_timeout_s": math.ceil(connect_timeout),
            "server_alive_interval_s": server_alive_interval,
            "server_alive_count_max": server_alive_count_max,
            "max_concurrent_starts": ssh_max_concurrent_starts,
            "pass_env": pass_env or None,
        }
        try:
            if workflow is not None:
                settings = workflow.ssh_settings(**ssh_given)
            else:
                settings = SshSettings(**{k: v for k, v in ssh_given.items() if v is not None})
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        if not workspace:
            flag = "--host" if host is not None else "worker.ssh_hosts"
            raise click.UsageError(f"--workspace is required with {flag} (a directory on that host)")
        where = workspace
        from ..errors import RemoteAcpError
        from .placement import fleet_hosts, is_selection

        try:
            if len(selectors) == 1:
                hosts = fleet_hosts(selectors[0], inventory_file, ssh_config, ansible)
            else:
                hosts = _selected(selectors, inventory_file, ssh_config, ansible)
        except RemoteAcpError as exc:  # the cache where inventories are kept cannot be trusted
            raise LocalIoError(str(exc)) from None
        if hosts is None:
            target = SshTarget(selectors[0], settings)
        else:
            from ..fleet.pool import HostPool

            if resume is not None and (len(selectors) > 1 or is_selection(selectors[0])):
                raise click.UsageError("--resume continues a session on its own host: give that host, not a selection")
            pool = HostPool(hosts, settings=settings)
    else:
        # An explicit empty --workspace goes to the launch, which refuses it (invalid_workspace_cwd).
        where = "" if workspace == "" else _absolute(workspace)
        if workflow is not None and workflow.config.acp.env_allowlist is not None:
            target = workflow.local_target()
    if resume == "last":
        label = target.label if target is not None else pool.hosts[0].destination if pool is not None else "local"
        try:  # the same agent, target and workspace: never another agent's session
            latest = history.recent(workspace=where, target=label, agent=agent_words, limit=1)
        except HistoryError as exc:
            raise LocalIoError(str(exc)) from None
        if not latest:
            raise click.UsageError(f"no saved session of {agent_words!r} for {where} on {label} to resume")
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
        pool=pool,
        wait_for_slot_s=wait_for_slot,
        max_tokens=max_tokens if max_tokens is not None else workflow.config.agent.max_tokens if workflow else None,
    )
    _collect_later()
    code = anyio.run(run_prompts, request)
    if code in (EXIT_BROKEN_PIPE, EXIT_LOCAL_IO):
        _discard_stdout()
    sys.exit(code)


def _selected(
    selectors: tuple[str, ...], inventory_file: str | None, ssh_config: str | None, ansible: tuple[str, ...]
) -> list[Host]:
    """The inventory hosts several selectors name together (a workflow's ``worker.ssh_hosts``)."""
    import hostinv

    from .local_files import read_inventory
    from .placement import load_merged

    merged = read_inventory(lambda: load_merged(inventory_file, ssh_config, ansible))
    try:
        return hostinv.select(merged, list(selectors))
    except hostinv.HostinvError as exc:
        raise click.UsageError(str(exc)) from None


def _collect_later() -> None:
    """Start-up is done: freeze what it built (modules, classes, options) out of the collector's
    reach and turn the collector back on for what the session itself allocates."""
    gc.freeze()
    gc.enable()


def _flush_stdout() -> None:
    if sys.stdout is not None:  # None: started with stdout closed
        sys.stdout.flush()


def _discard_stdout() -> None:
    """Keep the interpreter's final flush from failing again on a closed or full stdout."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no stdout at all
        pass


@cli.command()
@click.option("--workspace", default=None, callback=_no_nul, help="Only sessions of this workspace.")
@click.option("--host", default=None, help="Only sessions on this host ('local' for local ones).")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="How many to list.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def sessions(workspace: str | None, host: str | None, limit: int, as_json: bool) -> None:
    """List recent sessions (newest first), to continue one with `run --resume ID`.

    Exit status: 0 listed (or none recorded yet); 2 usage error; 10 the session history
    cannot be read; 141 the output was closed.
    """
    from .history import HistoryError, SessionHistory

    where = _absolute(workspace) if workspace and host is None else workspace
    try:
        history = SessionHistory()
        records = history.recent(workspace=where, target=host, limit=limit)
        if not records and host is not None and host != "local":
            # An inventory name: its sessions are recorded under the destination they ran on.
            from .resume import inventory_destination

            destination = inventory_destination(host)
            if destination is not None:
                records = history.recent(workspace=where, target=destination, limit=limit)
    except HistoryError as exc:
        raise LocalIoError(str(exc)) from None
    try:
        if as_json:
            from .jsonl import json_line

            for record in records:
                click.echo(json_line(record.to_json()))
            _flush_stdout()
            return
        from ..masking import escape_control

        # Two lines per session, never cut or folded: the id is what a person copies into
        # --resume, and an agent command or a path is as long as it is. Escaped: an agent's id
        # or name drives no terminal.
        lines = []
        for r in records:
            outcome = f"{r.outcome} [{r.error_kind}]" if r.error_kind else r.outcome
            lines.append(escape_control(f"{r.session_id}  {r.when}  {outcome}  ({r.obtained})"))
            lines.append(escape_control(f"  {r.target}:{r.workspace}  {r.agent}"))
        click.echo("\n".join(lines) if records else "no sessions recorded yet")
        _flush_stdout()
    except BrokenPipeError:
        _discard_stdout()
        sys.exit(EXIT_BROKEN_PIPE)
    except OSError as exc:
        _discard_stdout()
        raise LocalIoError(f"cannot write the output: {exc}") from None


def main() -> None:
    occupy_closed_std_fds()  # before anything opens a file or a pipe
    from ..targets.limits import raise_open_file_limit

    raise_open_file_limit()  # each session holds a few descriptors; the soft limit is often 1024
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

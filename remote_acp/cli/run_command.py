"""``remote-acp run``: the command line of a run, read into a :class:`~.run.RunRequest` and run.

ssh and the inventory (:mod:`.run_remote`) load only for a run on a host: a local run reaches its
agent without them.
"""

from __future__ import annotations

import gc
import math
import sys
from typing import TYPE_CHECKING, Any

import anyio
import click

from ..options import SessionOptions
from ..targets.limits import raise_open_file_limit
from ..targets.process.fork_server import prestart_launcher
from .exit_codes import EXIT_BROKEN_PIPE, EXIT_LOCAL_IO
from .history import HistoryError, SessionHistory
from .local_files import LocalIoError, checked_workflow, discard_stdout
from .params import absolute_workspace, no_nul, reattach_window_option
from .resume import resumed_where
from .run import RunRequest, run_prompts

if TYPE_CHECKING:
    from ..fleet.pool import HostPool
    from ..targets.launch import LaunchTarget

__all__ = ["run"]


@click.command()
@click.option(
    "--config",
    "config_file",
    default=None,
    callback=no_nul,
    help="A workflow file (YAML, or a WORKFLOW.md whose body is the prompt); the flags below override it.",
)
@click.option(
    "--agent",
    "agent",
    default=None,
    callback=no_nul,
    help="Agent command with its protocol switch, e.g. 'qwen --acp' (required without --config).",
)
@click.option(
    "--workspace",
    default=None,
    callback=no_nul,
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
    callback=no_nul,
    help="Run the agent on this host over ssh (alias, user@host, host:port), or on the best ready host of a "
    "selection of the inventory (@group, a glob such as 'build-*', an inventory host name).",
)
@click.option(
    "--inventory",
    "inventory_file",
    default=None,
    callback=no_nul,
    help="The inventory --host selects from [$REMOTE_ACP_INVENTORY, else inventory.yaml in the user config directory].",
)
@click.option(
    "--ansible",
    multiple=True,
    callback=no_nul,
    help="Also select --host from this Ansible inventory (INI or YAML). Repeatable.",
)
@click.option("--ssh-config", default=None, callback=no_nul, help="An ssh_config file to use instead of ~/.ssh/config.")
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
    callback=no_nul,
    help="Carry this environment variable to the agent over stdin (never on argv). Repeatable.",
)
@reattach_window_option(
    "Over ssh: the host keeps the agent running for up to SECONDS (at most 7 days) while the link is "
    "down, and the run reconnects [worker.ssh_reattach_window_s, else none: the agent ends with its link]."
)
@click.option(
    "--detach",
    is_flag=True,
    help="With a reattach window: after the prompts, leave the session running on its host for "
    "`remote-acp attach` instead of ending it.",
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
    reattach_window: int | None,
    detach: bool,
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
    # The soft open-file limit (often 1024) is raised for this process and the agent it starts,
    # before the launcher starts: the launcher keeps the limit it started with.
    raise_open_file_limit()
    prestart_launcher()  # it starts beside the event loop's imports and the session's set-up
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
        host, workspace = resumed_where(history, resume, host, workspace, workflow)
    selectors: tuple[str, ...] = (host,) if host is not None else workflow.ssh_hosts if workflow is not None else ()
    if selectors:
        # Seam: ssh and the inventory (about 15 ms of imports) load only for a run on a host.
        from ..targets.ssh.target import SshTarget
        from .run_remote import remote_start

        ssh_given: dict[str, Any] = {
            "host_key_policy": host_key_policy,
            "force_insecure_host_keys": force_insecure_host_keys or None,
            "config_file": ssh_config,
            "connect_timeout_s": math.ceil(connect_timeout),
            "server_alive_interval_s": server_alive_interval,
            "server_alive_count_max": server_alive_count_max,
            "max_concurrent_starts": ssh_max_concurrent_starts,
            "pass_env": pass_env or None,
            "reattach_window_s": reattach_window,
        }
        target, pool = remote_start(
            selectors,
            ssh_given,
            workflow,
            workspace=workspace,
            named_by="--host" if host is not None else "worker.ssh_hosts",
            resume=resume,
            inventory=(inventory_file, ssh_config, ansible),
        )
        assert workspace  # refused without one
        where = workspace
        if detach and (
            target is None or not isinstance(target, SshTarget) or target.settings.reattach_window_s is None
        ):
            raise click.UsageError("--detach needs a session with a reattach window on one host (--reattach-window)")
    else:
        if detach:
            raise click.UsageError(
                "--detach needs a session with a reattach window on a host: a local session ends with its run"
            )
        if reattach_window is not None:
            raise click.UsageError(
                "--reattach-window applies to a run on a host (--host, or worker.ssh_hosts in the workflow): "
                "a local session has no link to lose"
            )
        # An explicit empty --workspace goes to the launch, which refuses it (invalid_workspace_cwd).
        where = "" if workspace == "" else absolute_workspace(workspace)
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
        detach=detach,
        max_tokens=max_tokens if max_tokens is not None else workflow.config.agent.max_tokens if workflow else None,
    )
    code = anyio.run(_collecting, request)
    if code in (EXIT_BROKEN_PIPE, EXIT_LOCAL_IO):
        discard_stdout()
    sys.exit(code)


async def _collecting(request: RunRequest) -> int:
    """``run_prompts(request)`` once start-up is done, the event loop's own imports included: what
    start-up built (modules, classes, options) is frozen out of the collector's reach, and the
    collector is back on for what the session itself allocates."""
    gc.freeze()
    gc.enable()
    return await run_prompts(request)

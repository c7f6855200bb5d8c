"""``remote-acp check host``: can each host of a selection run this agent now, and if not, why?

The probe and the handshake load what they need where they run (asyncssh, the session core: a
probe-only check starts no session), a workflow file's machinery loads only with ``--config``, and
rich only for what a person reads (see :mod:`.check_tables`).

Exit status: 0 every host is ready; 20 some hosts could not be logged in to (unreachable,
auth_failed, host_key_unknown, host_key_changed) and every host reached is ready; 21 some host
that was reached is not ready (any other verdict); 2 usage (a selector that is malformed or
matches nothing, a bad option); 10 an inventory file cannot be read; 130 interrupted; 141 the
output was closed.
"""

from __future__ import annotations

import logging
import math
import os
import shlex
import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import anyio
import click

import hostinv
from hostinv.probes import HostProbe, ProbeSettings, Verdict, probe_hosts

from ..errors import RemoteAcpError
from ..fleet import exit_status
from ..fleet.cache import ProbeCache, resolve_cache_dir
from ..fleet.check import check_hosts
from ..options import SessionOptions
from ..paths import cache_root, checked
from ..targets.limits import raise_open_file_limit
from ..targets.process.fork_server import prestart_launcher
from ..targets.ssh.script import SLOT_DIR_PREFIX
from ..targets.ssh.settings import SshSettings
from .exit_codes import EXIT_INTERRUPTED
from .jsonl import json_line
from .local_files import InventoryFileError, checked_workflow, output_gone, print_notes, read_inventory
from .params import PATH, reattach_window_option
from .placement import load_merged

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from rich.progress import Progress

    from hostinv import Host

    from ..fleet import HostCheck

__all__ = ["agent_program", "check", "check_host_command", "render_json", "render_table"]

_PER_HOST_STARTS = 3
"""Handshakes starting on one host at once: well below sshd's default MaxStartups (10), which
drops connections that have not yet logged in beyond it."""


_CHECK_WINDOW_MAX_S = 30
"""The longest reattach window a handshake starts with (see ``--reattach-window``)."""


@click.group()
def check() -> None:
    """Check that hosts can run an agent."""


@check.command("host")
@click.argument("selectors", nargs=-1)
@click.option(
    "--config",
    "config_file",
    type=PATH,
    default=None,
    help="A workflow file: its agent, worker.ssh_hosts (when no SELECTORS) and ssh settings; flags override it.",
)
@click.option("--agent", default=None, help="Agent command with its protocol switch, e.g. 'qwen --acp'.")
@click.option("--workspace", required=True, help="Directory on the hosts the agent works in (absolute).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per host, stable keys.")
@click.option("--no-handshake", is_flag=True, help="Probe only: do not start the agent.")
@click.option("--concurrency", type=click.IntRange(min=1), default=32, show_default=True, help="Hosts checked at once.")
@click.option(
    "--inventory",
    "inventory_file",
    type=PATH,
    default=None,
    help="Our inventory file [$REMOTE_ACP_INVENTORY, else inventory.yaml in the user config directory].",
)
@click.option(
    "--ansible", type=PATH, multiple=True, help="Also select from this Ansible inventory (INI or YAML). Repeatable."
)
@click.option("--ssh-config", type=PATH, default=None, help="An ssh_config file instead of ~/.ssh/config.")
@click.option(
    "--host-key-policy",
    type=click.Choice(["accept-new", "yes"], case_sensitive=False),
    default=None,
    help="Unknown host keys: accept-new adds them to known_hosts, yes refuses them [accept-new].",
)
@click.option("--connect-timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True, help="Seconds.")
@click.option(
    "--handshake-timeout-ms",
    type=click.IntRange(min=1),
    default=30_000,
    show_default=True,
    help="Bound of initialize and of session/new, each.",
)
@click.option(
    "--ssh-pass-env",
    "pass_env",
    multiple=True,
    help="Carry this environment variable to the agent over stdin, as run does (a key the agent needs to "
    "open a session). Repeatable.",
)
@click.option(
    "--max-age",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Reuse probe results at most this many seconds old (0: probe every host).",
)
@reattach_window_option(
    "Start the handshake's session with a reattach window, as run would: a host that would not "
    "keep a detached session (it ends what a login leaves) is not ready [worker.ssh_reattach_window_s]. "
    "The handshake's window lasts at most 30 s, whatever SECONDS says."
)
def check_host_command(
    selectors: tuple[str, ...],
    config_file: str | None,
    agent: str | None,
    workspace: str,
    as_json: bool,
    no_handshake: bool,
    concurrency: int,
    inventory_file: str | None,
    ansible: tuple[str, ...],
    ssh_config: str | None,
    host_key_policy: str | None,
    connect_timeout: float,
    handshake_timeout_ms: int,
    pass_env: tuple[str, ...],
    max_age: float,
    reattach_window: int | None,
) -> None:
    """Check whether the hosts SELECTORS name can run AGENT in WORKSPACE now, and why not.

    Each host is probed over ssh (login, workspace, agent on the session's PATH, OS, load), then,
    unless --no-handshake, the agent is started the way a session starts it (initialize and
    session/new) and stopped. One verdict per host, in inventory order.

    A selector is @group (@all), a glob (build-*), a host name or ssh_config alias, or
    user@host[:port] / [v6addr]:port for a host in no inventory.

    With --config, a workflow file gives the agent, the hosts (its worker.ssh_hosts, when no
    SELECTORS are given), the host key policy, the variables carried and the reattach window; a
    file with errors checks nothing (exit status 2).

    Exit status: 0 every host ready; 20 some hosts not reached (unreachable, auth_failed,
    host_key_*) and the others ready; 21 some host reached is not ready; 2 usage error;
    10 an inventory file cannot be read; 141 the output was closed.
    """
    # Each host checked at once holds a few descriptors (its ssh, a handshake's pipes) and the soft
    # limit is often 1024: raised before the launcher of the handshakes' supervisors starts, which
    # keeps the limit it started with.
    raise_open_file_limit()
    if not no_handshake:
        prestart_launcher()  # it starts beside the probes, which come first
    workflow = None
    if config_file is not None:
        workflow = checked_workflow(config_file)
        if agent is None:
            command = workflow.command
            agent = command if isinstance(command, str) else shlex.join(command)
        selectors = selectors or workflow.ssh_hosts
        host_key_policy = host_key_policy or workflow.config.worker.ssh_strict_host_key_checking
        if reattach_window is None and not no_handshake:
            reattach_window = workflow.config.worker.ssh_reattach_window_s
    if agent is None:
        raise click.UsageError("give the agent: --agent, or --config with a workflow file")
    if reattach_window is not None and no_handshake:
        raise click.UsageError("--reattach-window is checked by the handshake's start: drop --no-handshake")
    if not selectors:
        where = " (the workflow has no worker.ssh_hosts)" if workflow is not None else ""
        raise click.UsageError(f"Missing argument 'SELECTORS...'{where}.")
    try:
        words = shlex.split(agent)
    except ValueError as exc:
        raise click.UsageError(f"--agent does not read as a command: {exc}") from None
    if not words or "\0" in agent:
        raise click.UsageError("--agent is empty")
    if not workspace.startswith("/") or "\0" in workspace:
        raise click.UsageError("--workspace must be an absolute path (a directory on the hosts)")
    unset = [name for name in pass_env if name not in os.environ]
    if unset:
        raise click.UsageError(f"--ssh-pass-env names {', '.join(unset)}, which is not set in the environment")
    if ssh_config is not None and ssh_config.lower() != "none" and not os.path.isfile(ssh_config):
        raise click.UsageError(f"the ssh config file {ssh_config} does not exist")
    try:
        checked(cache_root())  # probes keep ssh -G's answers and their results there
    except RemoteAcpError as exc:
        raise InventoryFileError(str(exc)) from None
    merged = read_inventory(lambda: load_merged(inventory_file, ssh_config, ansible))
    try:
        hosts = hostinv.select(merged, selectors)
    except hostinv.HostinvError as exc:
        raise click.UsageError(str(exc)) from None
    print_notes(merged)
    options = SessionOptions(
        command=agent, read_timeout_ms=handshake_timeout_ms, initialize_floor_ms=handshake_timeout_ms
    )
    policy = host_key_policy.lower() if host_key_policy else None
    if policy == "no":  # only a workflow can ask for it (the flag's choices lack it)
        raise click.UsageError(
            "check host refuses host key policy 'no' (worker.ssh_strict_host_key_checking): a host "
            "whose key changed must show as host_key_changed"
        )
    settings = SshSettings(
        host_key_policy=policy,  # type: ignore[arg-type]  # one of the choices above
        config_file=ssh_config,
        connect_timeout_s=max(1, math.ceil(connect_timeout)),
        max_concurrent_starts=_PER_HOST_STARTS,
        pass_env=pass_env or (tuple(workflow.config.worker.ssh_pass_env) if workflow is not None else ()),
        # The host's answer does not depend on the window's length, and a check cut short (an
        # interrupt, a lost link) leaves its session on the host for the whole window: kept short.
        reattach_window_s=None if reattach_window is None else min(reattach_window, _CHECK_WINDOW_MAX_S),
    )
    request = _Request(
        hosts=hosts,
        program=agent_program(words),
        workspace=workspace,
        options=options,
        settings=settings,
        handshake=not no_handshake,
        concurrency=concurrency,
        connect_timeout=connect_timeout,
        policy=policy,
        max_age=max_age,
        progress=sys.stderr.isatty(),
    )
    _quiet_session_warnings()
    done: dict[str, HostCheck] = {}

    def finished(check: HostCheck) -> None:
        done[check.host.name] = check
        if as_json:  # each host as it finishes, not held until the slowest one ends
            _write(render_json([check]))

    interrupted = False
    try:
        anyio.run(_check, replace(request, on_done=finished))
    except KeyboardInterrupt:
        interrupted = True  # what is known is printed; the hosts still running are marked
    left = [h for h in hosts if h.name not in done]
    if as_json:
        _write("".join(json_line(_interrupted(h)) + "\n" for h in left))
    else:
        checks = [done[h.name] for h in hosts if h.name in done]
        _write_table(checks, left)
    if interrupted:
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(exit_status(done.values()))


def _write(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        output_gone()
    except OSError as exc:
        raise InventoryFileError(f"cannot write the output: {exc}") from None


def _interrupted(host: Host) -> dict[str, object]:
    """The JSON line of a host whose check an interrupt cut short."""
    return {
        "type": "host_check",
        "host": host.name,
        "destination": host.destination,
        "verdict": "interrupted",
        "ready": False,
        "message": "the check was interrupted before this host's verdict",
    }


def _write_table(checks: Sequence[HostCheck], left: Sequence[Host]) -> None:
    # Seam: rich (20-30 ms) loads only for what a person reads; JSON output never loads it.
    from .check_tables import checks_text

    _write(checks_text(checks, left))


@dataclass(frozen=True, slots=True)
class _Request:
    hosts: list[Host]
    program: str
    workspace: str
    options: SessionOptions
    settings: SshSettings
    handshake: bool
    concurrency: int
    connect_timeout: float
    policy: str | None
    max_age: float
    progress: bool
    on_done: Callable[[HostCheck], None] | None = None


async def _check(request: _Request) -> list[HostCheck]:
    probe_settings = ProbeSettings(
        slot_prefix=SLOT_DIR_PREFIX,
        resolve_cache=str(resolve_cache_dir()),
        connect_timeout_s=request.connect_timeout,
        ssh_config=request.settings.config_file,
        host_key_policy="yes" if request.policy == "yes" else "accept-new",
    )
    cache = ProbeCache(context=repr(probe_settings))
    progress = _progress(len(request.hosts)) if request.progress else None
    finished: set[str] = set()
    failing: set[str] = set()

    def seen(name: str, ready: bool, final: bool) -> None:
        if not ready:
            failing.add(name)
        if final or not ready:
            finished.add(name)
        if progress is not None:
            progress.update(
                progress.task_ids[0],
                completed=len(finished),
                description=f"hosts checked, {len(failing)} failing",
            )

    def probed(result: HostProbe) -> None:
        seen(result.host.name, result.verdict is Verdict.READY, not request.handshake)

    async def probe(hosts: list[Host]) -> Sequence[HostProbe]:
        return await probe_hosts(
            hosts,
            request.program,
            request.workspace,
            probe_settings,
            concurrency=request.concurrency,
            on_done=probed,
        )

    def checked(check: HostCheck) -> None:
        seen(check.host.name, check.ready, True)
        if request.on_done is not None:
            request.on_done(check)

    if progress is not None:
        progress.start()
    try:
        return await check_hosts(
            request.hosts,
            request.options,
            request.workspace,
            settings=request.settings,
            probe=probe,
            handshake=request.handshake,
            login_probe=probe_settings,
            concurrency=request.concurrency,
            cache=cache,
            max_age_s=request.max_age,
            agent_program=request.program,
            on_done=checked,
        )
    finally:
        if progress is not None:
            progress.stop()


def agent_program(words: Sequence[str]) -> str:
    """The program a shell fragment runs (what the probe looks for on the host): its first word
    after leading ``NAME=value`` assignments, as ``sh`` reads ``HOME=/x copilot --acp``."""
    for word in words:
        name, equals, _ = word.partition("=")
        if not (equals and name and (name[0].isalpha() or name[0] == "_") and name.replace("_", "a").isalnum()):
            return word
    return words[-1]  # only assignments: nothing runs; the probe says it is not found


def _quiet_session_warnings() -> None:
    """A handshake that fails is a verdict with its stderr tail, not a warning: at the default log
    level the session's per-start warnings (the agent's stderr, ssh's words) would only repeat it
    between the progress lines. ``--log-level info`` or ``debug`` keeps them."""
    if logging.getLogger("remote_acp").getEffectiveLevel() >= logging.WARNING:
        logging.getLogger("remote_acp.session").setLevel(logging.ERROR)


def _progress(total: int) -> Progress:
    # Seam: rich (20-30 ms) loads only for what a person sees, here a progress bar on a terminal.
    from .check_tables import checks_progress

    return checks_progress(total)


def render_json(checks: Sequence[HostCheck]) -> str:
    """One line of ASCII JSON per host, in the order given."""
    return "".join(json_line(c.to_json()) + "\n" for c in checks)


def render_table(checks: Sequence[HostCheck], interrupted: Sequence[Host] = ()) -> object:
    """The rich summary table of the checks (cells as text: a '[' in a message is no style tag;
    a narrow terminal folds cells, never cuts them)."""
    # Seam: rich (20-30 ms) loads only for what a person reads; JSON output never loads it.
    from .check_tables import checks_table

    return checks_table(checks, interrupted)

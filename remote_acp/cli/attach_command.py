"""``remote-acp attach``: take a session with a reattach window over from another process.

The session history (:mod:`.history`) keeps the handle of every session a run started with a
window, from its start and as each turn starts, so a run that was killed (or detached with
``run --detach``) can be taken over by name. The run's own machinery does the rest
(:func:`~.run.run_prompts`): the turn that was in flight first, then the prompts given.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import anyio
import click

from ..options import SessionOptions
from ..session.handle import SessionHandle
from ..session.takeover import attach_target
from ..targets.ssh.settings import SshSettings
from .exit_codes import EXIT_BROKEN_PIPE, EXIT_LOCAL_IO
from .history import HistoryError, SessionHistory, SessionRecord
from .local_files import LocalIoError, discard_stdout
from .run import RunRequest, run_prompts

__all__ = ["attach", "recorded_handle"]


def recorded_handle(history: SessionHistory, name: str) -> tuple[SessionRecord, SessionHandle]:
    """The latest record of the session ``name`` (an ACP session id, or the relay's id that
    ``run --detach`` prints) that holds a handle, and the handle.

    :raises click.UsageError: no such record, or one whose handle cannot be read.
    :raises LocalIoError: the history cannot be read.
    """
    try:
        records = history.records()
    except HistoryError as exc:
        raise LocalIoError(str(exc)) from None
    # A session is its id on its host and workspace; its latest record says whether it still has a
    # handle (a run that ended it records none). A relay id names the session it was recorded with.
    latest: dict[tuple[str, str, str], SessionRecord] = {}
    named: tuple[str, str, str] | None = None
    for record in records:
        key = (record.session_id, record.target, record.workspace)
        latest[key] = record
        if name == record.session_id or (record.handle is not None and record.handle.get("relay_id") == name):
            named = key
    found = latest.get(named) if named is not None else None
    if found is None or found.handle is None:
        why = (
            "is not in the session history"
            if found is None
            else "has no reattach handle (it ended, or ran without --reattach-window)"
        )
        raise click.UsageError(f"session {name} {why}: see `remote-acp sessions`")
    latest_record = found
    try:
        return latest_record, SessionHandle.from_json(found.handle)
    except ValueError as exc:
        raise click.UsageError(f"the session history's handle of {name} cannot be used: {exc}") from None


@click.command()
@click.argument("session")
@click.argument("prompts", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line instead of text.")
@click.option(
    "--detach", is_flag=True, help="After the prompts, detach again (the host keeps the session) instead of ending it."
)
@click.option("--read-timeout-ms", type=int, default=None, help="Bound of synchronous waits [5000].")
@click.option("--turn-timeout-ms", type=int, default=None, help="Bound of one turn [3600000].")
@click.option("--stall-timeout-ms", type=int, default=None, help="Longest gap between events [300000].")
@click.option("--stop-grace-ms", type=int, default=None, help="Graceful teardown window [5000].")
@click.option("--ssh-config", default=None, help="The ssh_config the session was started with.")
@click.option("--host-key-policy", type=click.Choice(["accept-new", "yes", "no"], case_sensitive=False), default=None)
@click.option("--force-insecure-host-keys", is_flag=True, help="Allow --host-key-policy no.")
@click.option("--connect-timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True)
@click.option("--server-alive-interval", type=int, default=15, show_default=True)
@click.option("--server-alive-count-max", type=int, default=3, show_default=True)
def attach(
    session: str,
    prompts: tuple[str, ...],
    as_json: bool,
    detach: bool,
    read_timeout_ms: int | None,
    turn_timeout_ms: int | None,
    stall_timeout_ms: int | None,
    stop_grace_ms: int | None,
    ssh_config: str | None,
    host_key_policy: str | None,
    force_insecure_host_keys: bool,
    connect_timeout: float,
    server_alive_interval: int,
    server_alive_count_max: int,
) -> None:
    """Take over SESSION, started with --reattach-window, whose run was stopped or detached.

    What the agent sent meanwhile comes first, and the rest of the turn it had in flight; then
    each PROMPT runs as one turn. The session ends with this run unless --detach is given.

    Exit status as for `run`; 3 when the host no longer keeps the session (session_expired) or
    it is not this user's (not_owner), 5 when another controller holds it (attached_elsewhere).
    """
    history = SessionHistory()
    record, handle = recorded_handle(history, session)
    bounds: dict[str, Any] = {
        "read_timeout_ms": read_timeout_ms,
        "turn_timeout_ms": turn_timeout_ms,
        "stall_timeout_ms": stall_timeout_ms,
        "stop_grace_ms": stop_grace_ms,
    }
    ssh: dict[str, Any] = {
        "host_key_policy": host_key_policy,
        "force_insecure_host_keys": force_insecure_host_keys,
        "config_file": ssh_config,
        "connect_timeout_s": math.ceil(connect_timeout),
        "server_alive_interval_s": server_alive_interval,
        "server_alive_count_max": server_alive_count_max,
    }
    try:
        # The agent runs already: its command is the recorded one, for the record only.
        options = SessionOptions(command=record.agent or "agent", **{k: v for k, v in bounds.items() if v is not None})
        settings = SshSettings(**{k: v for k, v in ssh.items() if v is not None})
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    request = RunRequest(
        options=options,
        workspace=handle.workspace,
        prompts=list(prompts),
        as_json=as_json,
        target=attach_target(handle, settings),
        history=history,
        attach=handle,
        detach=detach,
    )
    code = anyio.run(run_prompts, request)
    if code in (EXIT_BROKEN_PIPE, EXIT_LOCAL_IO):
        discard_stdout()
    sys.exit(code)

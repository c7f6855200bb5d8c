"""``remote-acp sessions``: the recent sessions of the session history (see :mod:`.history`), to
continue one with ``run --resume ID``."""

from __future__ import annotations

import re
import sys
import time
from typing import Any, Final

import click

from ..errors import RemoteAcpError
from ..masking import escape_control
from ..session.handle import SessionHandle
from ..targets.process.tree import ProcessRef, boot_id, is_running
from .exit_codes import EXIT_BROKEN_PIPE
from .history import HistoryError, SessionHistory, SessionRecord
from .jsonl import json_line
from .local_files import LocalIoError, discard_stdout
from .params import absolute_workspace, no_nul

__all__ = ["inventory_destination", "reattach_state", "sessions"]

_RUN: Final = re.compile(r"([0-9]{1,10}) ([0-9]{1,20}) ([0-9a-f-]{1,64})")


def reattach_state(record: SessionRecord, now: float) -> dict[str, Any] | None:
    """What a record says of its session's reattach window, without its secret: ``None`` for a
    session that has none (or ended)."""
    if record.handle is None:
        return None
    try:
        handle = SessionHandle.from_json(record.handle)
    except ValueError:
        return None
    left = handle.seconds_left(now=now)
    state: dict[str, Any] = {"relay_id": handle.relay_id, "window_s": handle.window_s}
    if left is None:
        # Recorded while a run held it: that run may be alive, or killed with the session kept.
        run = _recorded_run(record)
        if run is None:  # an older record, or /proc could not say
            state.update(
                state="attached",
                says=f"reattach window {handle.window_s} s: if its run is gone, `remote-acp attach {handle.relay_id}`",
            )
        elif is_running(run):
            state.update(state="attached", run_pid=run.pid, says=f"attached to its run (pid {run.pid})")
        else:
            # When it died is not known: the host's window started when its link went.
            state.update(
                state="run_gone",
                run_pid=run.pid,
                says=f"its run (pid {run.pid}) is gone without detaching: the host keeps the session for "
                f"{handle.window_s} s after its link went; `remote-acp attach {handle.relay_id}`",
            )
    elif left > 0:
        state.update(
            state="detached",
            seconds_left=round(left),
            says=f"detached, {round(left)} s left: `remote-acp attach {handle.relay_id}`",
        )
    else:
        state.update(state="expired", says=f"expired {round(-left)} s ago: the host ended it")
    return state


def _recorded_run(record: SessionRecord) -> ProcessRef | None:
    """The run a record names, when it ran on this machine since its last boot (else it cannot
    be told whether it runs: ``None``)."""
    match = _RUN.fullmatch(record.run or "")
    if match is None or match[3] != boot_id():
        return None
    return ProcessRef(int(match[1]), int(match[2]))


def _listed(record: SessionRecord, now: float) -> dict[str, Any]:
    """A record as ``--json`` lists it: its handle's secret never leaves the history."""
    listed = record.to_json()
    listed.pop("handle", None)
    listed.pop("run", None)
    window = reattach_state(record, now)
    if window is not None:
        window.pop("says")
        listed["reattach"] = window
    return listed


@click.command()
@click.option("--workspace", default=None, callback=no_nul, help="Only sessions of this workspace.")
@click.option("--host", default=None, help="Only sessions on this host ('local' for local ones).")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="How many to list.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def sessions(workspace: str | None, host: str | None, limit: int, as_json: bool) -> None:
    """List recent sessions (newest first), to continue one with `run --resume ID`.

    Exit status: 0 listed (or none recorded yet); 2 usage error; 10 the session history
    cannot be read; 141 the output was closed.
    """
    where = absolute_workspace(workspace) if workspace and host is None else workspace
    try:
        history = SessionHistory()
        records = history.recent(workspace=where, target=host, limit=limit)
        if not records and host is not None and host != "local":
            # An inventory name: its sessions are recorded under the destination they ran on.
            destination = inventory_destination(host)
            if destination is not None:
                records = history.recent(workspace=where, target=destination, limit=limit)
    except HistoryError as exc:
        raise LocalIoError(str(exc)) from None
    now = time.time()
    if as_json:
        text = "".join(json_line(_listed(record, now)) + "\n" for record in records)
    else:
        # Two lines per session (three with a reattach window), never cut or folded: the id is
        # what a person copies into --resume, and an agent command or a path is as long as it
        # is. Escaped: an agent's id or name drives no terminal.
        lines = []
        for r in records:
            outcome = f"{r.outcome} [{r.error_kind}]" if r.error_kind else r.outcome
            lines.append(escape_control(f"{r.session_id}  {r.when}  {outcome}  ({r.obtained})"))
            lines.append(escape_control(f"  {r.target}:{r.workspace}  {r.agent}"))
            if (window := reattach_state(r, now)) is not None:
                lines.append(escape_control(f"  {window['says']}"))
        text = "\n".join(lines) + "\n" if records else "no sessions recorded yet\n"
    try:
        click.echo(text, nl=False)
        if sys.stdout is not None:  # None: started with stdout closed
            sys.stdout.flush()
    except BrokenPipeError:
        discard_stdout()
        sys.exit(EXIT_BROKEN_PIPE)
    except OSError as exc:
        discard_stdout()
        raise LocalIoError(f"cannot write the output: {exc}") from None


def inventory_destination(name: str) -> str | None:
    """The destination of the inventory host ``name``, or ``None`` (no such host, no inventory,
    or one that cannot be read: a listing then shows what it has)."""
    # Seam: the inventory's loaders (about 3 ms) load only when --host names a host no recorded
    # session ran on, which the inventory may know by another destination.
    from .placement import fleet_hosts

    try:
        hosts = fleet_hosts(name, None, None)
    except (click.ClickException, RemoteAcpError, OSError):
        return None
    return hosts[0].destination if hosts and len(hosts) == 1 else None

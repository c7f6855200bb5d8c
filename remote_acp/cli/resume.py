"""Where ``run --resume ID`` continues: the session history read for the command line (see
:mod:`.history`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .history import HistoryError
from .local_files import LocalIoError

if TYPE_CHECKING:
    from ..config import Workflow
    from .history import SessionHistory

__all__ = ["resumed_where"]


def resumed_where(
    history: SessionHistory, resume: str, host: str | None, workspace: str | None, workflow: Workflow | None
) -> tuple[str | None, str | None]:
    """Where ``run --resume ID`` continues: the host and workspace the history recorded for the
    session, unless the command line (or the workflow) names them. An id the history does not
    hold is said before anything runs, with the recorded sessions it may have meant."""
    try:
        recorded = history.find(resume)
        close = history.close_to(resume) if recorded is None else []
    except HistoryError as exc:
        raise LocalIoError(str(exc)) from None
    if recorded is None:
        near = "; ".join(f"{r.session_id} ({r.target}:{r.workspace}, {r.when})" for r in close)
        click.echo(
            f"remote-acp: session {resume} is not in the session history: it is offered to the agent as "
            "given, and a new session starts if the agent cannot continue it"
            + (f". Recorded sessions: {near}" if near else ""),
            err=True,
        )
        return host, workspace
    if host is None and (workflow is None or not workflow.ssh_hosts) and recorded.target != "local":
        host = recorded.target  # continue where it ran
    if workspace is None:
        workspace = recorded.workspace
    return host, workspace

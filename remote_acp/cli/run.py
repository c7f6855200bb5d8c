"""``remote-acp run``: one session, one turn per prompt, stopping at the first turn that fails."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import RemoteAcpError
from ..session import Session, open_session
from .exit_codes import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, exit_code_for
from .history import SessionHistory, SessionRecord
from .render import HumanRenderer, JsonRenderer

if TYPE_CHECKING:
    from ..launch import LaunchTarget
    from ..options import SessionOptions

__all__ = ["RunRequest", "run_prompts"]


@dataclass(frozen=True, slots=True)
class RunRequest:
    options: SessionOptions
    workspace: str
    prompts: list[str]
    as_json: bool = False
    target: LaunchTarget | None = None
    resume: str | None = None
    show_replay: bool = False
    history: SessionHistory | None = None


async def _watch_signals(session_ref: list[Session], interrupted: list[bool], scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            if interrupted or not session_ref:
                scope.cancel()  # a second signal: stop now (teardown still runs, shielded)
                return
            interrupted.append(True)
            session_ref[0].cancel()


async def run_prompts(request: RunRequest) -> int:
    renderer: JsonRenderer | HumanRenderer = (
        JsonRenderer() if request.as_json else HumanRenderer(show_replay=request.show_replay)
    )
    final: dict[str, Any] = {"type": "run_result", "session_id": None, "outcome": None, "error_kind": None}
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    session_ref: list[Session] = []
    interrupted: list[bool] = []
    code = 0
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_signals, session_ref, interrupted, scope)
            try:
                async with open_session(
                    request.workspace, request.options, request.target, resume=request.resume
                ) as session:
                    session_ref.append(session)
                    assert session.info is not None
                    final.update(session_id=session.session_id, obtained=session.info.obtained)
                    for prompt in request.prompts:
                        result = await session.run_turn(prompt, renderer.event)
                        final["outcome"], final["message"] = result.outcome, result.message
                        if isinstance(renderer, JsonRenderer):
                            renderer.emit(result.to_json())
                        if result.error is not None:
                            final["error_kind"] = result.error.kind.value
                            code = exit_code_for(result.error.kind.value)
                            break
            except RemoteAcpError as exc:
                final.update(outcome="start_failed", error_kind=exc.kind.value, message=str(exc))
                code = exit_code_for(exc.kind.value)
            except BrokenPipeError:
                # Whoever read our output went away (`| head`): stop quietly, as a pipeline expects.
                tg.cancel_scope.cancel()
                return EXIT_BROKEN_PIPE
            tg.cancel_scope.cancel()
    if scope.cancelled_caught or interrupted:
        final.update(outcome=final["outcome"] or "interrupted", message="interrupted")
        code = EXIT_INTERRUPTED
    _remember(request, final, started)
    if isinstance(renderer, JsonRenderer):
        renderer.emit(final)
    else:
        renderer.note(
            f"session {final['session_id'] or '-'}: {final['outcome']}"
            + (f" [{final['error_kind']}] {final.get('message', '')}" if final["error_kind"] else "")
        )
    return code


def _remember(request: RunRequest, final: dict[str, Any], started: str) -> None:
    if request.history is None or not final["session_id"]:
        return
    options = request.options
    agent = options.command if isinstance(options.command, str) else " ".join(options.command)
    record = SessionRecord(
        session_id=final["session_id"],
        agent=agent,
        target=request.target.label if request.target is not None else "local",
        workspace=request.workspace,
        when=started,
        outcome=final["outcome"] or "started",
        error_kind=final["error_kind"],
        obtained=final.get("obtained", "new"),
    )
    try:
        request.history.add(record)
    except OSError as exc:  # the run itself succeeded or failed on its own account
        import logging

        logging.getLogger("remote_acp.cli").warning("could not record the session", extra={"error": str(exc)})

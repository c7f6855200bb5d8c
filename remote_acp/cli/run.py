"""``remote-acp run``: one session, one turn per prompt, stopping at the first turn that fails."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import RemoteAcpError
from ..session.core import Session, open_session
from .exit_codes import EXIT_BROKEN_PIPE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_LOCAL_IO, EXIT_OK, exit_code_for
from .history import HistoryError, SessionHistory, SessionRecord
from .render import HumanRenderer, JsonRenderer, OutputError
from .streams import tolerant

if TYPE_CHECKING:
    from ..options import SessionOptions
    from ..targets.launch import LaunchTarget

__all__ = ["RunRequest", "run_prompts"]

log = logging.getLogger("remote_acp.cli")


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


async def _run_turn(session: Session, prompt: str, renderer: JsonRenderer | HumanRenderer) -> dict[str, Any]:
    """Run one turn and return its ``turn_result`` object, also when the turn could not start."""
    try:
        result = await session.run_turn(prompt, renderer.event)
    except RemoteAcpError as exc:
        # In flight already, connection gone, prompt not taken in time: the turn never started,
        # but it still gets its one result object.
        return {
            "type": "turn_result",
            "session_id": session.session_id,
            "outcome": "turn_not_started",
            "error_kind": exc.kind.value,
            "retryable": exc.retryable,
            "message": str(exc),
            "stop_reason": None,
            "last_message": "",
        }
    return result.to_json()


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _say(text: str) -> None:
    """A last line on stderr (unsaid when stderr cannot be written)."""
    with contextlib.suppress(OSError, ValueError):
        err = tolerant(sys.stderr)
        err.write(f"remote-acp: {text}\n")
        err.flush()


async def run_prompts(request: RunRequest) -> int:
    renderer: JsonRenderer | HumanRenderer = (
        JsonRenderer() if request.as_json else HumanRenderer(show_replay=request.show_replay)
    )
    final: dict[str, Any] = {"type": "run_result", "session_id": None, "outcome": None, "error_kind": None}
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    session_ref: list[Session] = []
    interrupted: list[bool] = []
    output_failed: OutputError | None = None
    code = EXIT_OK
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
                        turn = await _run_turn(session, prompt, renderer)
                        final["outcome"], final["message"] = turn["outcome"], turn["message"]
                        if isinstance(renderer, JsonRenderer):
                            renderer.emit(turn)
                        if turn["error_kind"] is not None:
                            final["error_kind"] = turn["error_kind"]
                            code = exit_code_for(turn["error_kind"])
                            break
            except RemoteAcpError as exc:
                final.update(outcome="start_failed", error_kind=exc.kind.value, message=str(exc))
                code = exit_code_for(exc.kind.value)
            except OutputError as exc:
                # Whoever read our output went away (`| head`: stop quietly, as a pipeline
                # expects), or the output cannot be written at all (a full disk).
                output_failed = exc
                final.update(outcome="output_failed", message=str(exc))
                code = EXIT_BROKEN_PIPE if exc.broken_pipe else EXIT_LOCAL_IO
            except Exception as exc:  # a bug: say so in one line, never a traceback
                log.debug("internal error", exc_info=True)
                final.update(outcome="internal_error", message=f"internal error: {_describe(exc)}")
                code = EXIT_INTERNAL
            tg.cancel_scope.cancel()
    if (scope.cancelled_caught or interrupted) and output_failed is None:
        final.update(outcome=final["outcome"] or "interrupted", message="interrupted")
        code = EXIT_INTERRUPTED
    _remember(request, final, started)
    if output_failed is not None:
        if not output_failed.broken_pipe:
            _say(str(output_failed))
        return code
    try:
        if isinstance(renderer, JsonRenderer):
            renderer.emit(final)
            if final["outcome"] == "internal_error":
                _say(final["message"])
        else:
            line = f"session {final['session_id'] or '-'}: {final['outcome']}"
            if final["error_kind"]:
                line += f" [{final['error_kind']}] {final.get('message', '')}"
            elif final["outcome"] == "internal_error":
                line += f" ({final['message']})"
            renderer.note(line)
    except OutputError as exc:
        if not exc.broken_pipe:
            _say(str(exc))
        return EXIT_BROKEN_PIPE if exc.broken_pipe else EXIT_LOCAL_IO
    return code


def _remember(request: RunRequest, final: dict[str, Any], started: str) -> None:
    """Record the session for ``sessions`` and ``--resume``; never fails the run (a warning)."""
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
    except Exception as exc:  # the run itself succeeded or failed on its own account
        log.warning("could not record the session: %s", exc if isinstance(exc, HistoryError) else _describe(exc))

"""``remote-acp run``: one session, one turn per prompt, stopping at the first turn that fails.

Tokens: a turn is measured when a measurement source sent its ``token_usage`` figure; the run
adds the measured turns up and counts the others as unmeasured (never as zero). With
``max_tokens`` set, a measured run whose total reaches the ceiling sends no further prompt (the
outcome ``token_ceiling_reached``, error kind ``turn_token_limit``); a run with unmeasured turns
says the ceiling could not bound it.

Load spacing across processes: a ``--resume`` seeds the process-wide
:data:`~remote_acp.session.continuation.ORIGINS` with the creation time the session history
kept, so a load in the minute the session was created waits it out, whoever created it; the
run's own record keeps the creation time for the next one.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import RemoteAcpError
from ..events import TokenLowerBound, TokenUsage
from ..session.continuation import ORIGINS
from ..session.core import Session, open_session
from ..targets.process.tree import boot_id, process_ref
from .exit_codes import EXIT_BROKEN_PIPE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_LOCAL_IO, EXIT_OK, exit_code_for
from .history import HistoryError, SessionHistory, SessionRecord
from .render import HumanRenderer, JsonRenderer
from .run_tokens import RunTokens
from .streams import Output, OutputError, standard_output

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..fleet.pool import HostPool, Placement, SlotWait
    from ..options import SessionOptions
    from ..session.handle import SessionHandle
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
    pool: HostPool | None = None
    """Place the session on the best ready host of the pool (``target`` is then unused)."""
    max_tokens: int | None = None
    """The run's token ceiling: no prompt is sent once the measured total reaches it."""
    wait_for_slot_s: float = 0.0
    """A placed run: how long to wait for a free agent slot when every host is at capacity."""
    attach: SessionHandle | None = None
    """Take this detached session over (``target`` is its ssh target): the turn it had in flight
    first, then the prompts."""
    detach: bool = False
    """Detach the session after the prompts instead of ending it (a reattach window's only)."""


@dataclass(slots=True)
class _Progress:
    """What the run learns on the way that its closing lines and its record need."""

    tokens: RunTokens
    created: datetime | None = None
    """When the session was created, if known (kept in the history for a later load)."""
    resumed_created: datetime | None = None
    """When the session to resume was created, as the history said."""
    held_s: float | None = None
    """How long a load waited out the session's creation minute."""
    started: str = ""
    handle: SessionHandle | None = None
    """The session's handle as last recorded (a detached one's once it is detached)."""


# How long the closing lines may wait for a reader that makes no progress: an unread pipe must
# not hold the exit (the status is the run's own; the lines are lost with the pipe).
FINAL_IDLE_S = 2.0


class _Stop:
    """Signals, and what they stop: a first SIGINT or SIGTERM cancels the turn in flight; a
    second one stops at once (the session is killed: the turn ends now, the agent's tree is
    SIGKILLed); any signal means output no longer waits for a reader."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self.scope = anyio.CancelScope()
        self.session: Session | None = None
        self.signals = 0
        self.turn_in_flight = False
        self._killed = False

    async def watch(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                self.signals += 1
                self.output.give_up()
                session = self.session
                if session is None:
                    self.scope.cancel()  # not started yet: the start's own cleanup still runs, shielded
                elif self.signals == 1:
                    session.cancel()  # between turns (or in teardown): no next turn starts
                elif not self._killed and (kill := getattr(session, "kill", None)) is not None:
                    self._killed = True
                    kill()
                else:  # a session without kill(), or a third signal
                    self.scope.cancel()


def _turn_line(session_id: str, outcome: str, kind: str, cause: str, retryable: bool, message: str) -> dict[str, Any]:
    """A ``turn_result`` object for a turn the session could not report itself."""
    return {
        "type": "turn_result",
        "session_id": session_id,
        "outcome": outcome,
        "error_kind": kind,
        "cause": cause,
        "retryable": retryable,
        "message": message,
        "stop_reason": None,
        "last_message": "",
    }


async def _run_turn(
    session: Session,
    prompt: str | None,
    renderer: JsonRenderer | HumanRenderer,
    tokens: RunTokens,
    on_sent: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run one turn and return its ``turn_result`` object, also when the turn could not start.
    ``prompt`` ``None``: the turn a session taken over had in flight. ``on_sent``: called once the
    prompt is on its way."""
    measured = False
    lower: TokenLowerBound | None = None
    try:
        async with session.turn(prompt) if prompt is not None else session.resume_turn() as turn:
            if on_sent is not None:
                on_sent()
            async for event in turn:
                if isinstance(event, TokenUsage):
                    measured = True
                    tokens.add(event)
                elif isinstance(event, TokenLowerBound):
                    lower = event
                await renderer.event(event)
    except RemoteAcpError as exc:
        # In flight already, connection gone, prompt not taken in time: the turn never started,
        # but it still gets its one result object. (A core that reports this as a result with
        # the outcome turn_not_started goes through to_json below.)
        return _turn_line(
            session.session_id, "turn_not_started", exc.kind.value, exc.cause.value, exc.retryable, str(exc)
        )
    assert turn.result is not None
    result: dict[str, Any] = turn.result.to_json()
    if result["outcome"] != "turn_not_started":
        tokens.turn_ended(measured)
        if not measured and isinstance(renderer, HumanRenderer):
            if session.measured:
                await renderer.note("tokens: not measured for this turn (no figure arrived)")
            if lower is not None:
                await renderer.note(
                    f"the agent says this turn used at least {lower.input_tokens} in, {lower.output_tokens} out "
                    f"({lower.source}: a lower bound, not measured)"
                )
    return result


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _say(output: Output, text: str) -> None:
    """A last line on stderr (unsaid when stderr cannot be written)."""
    with contextlib.suppress(OutputError):
        output.err.put(f"remote-acp: {text}\n".encode(output.encoding, "backslashreplace"))


async def _drive(
    request: RunRequest,
    renderer: JsonRenderer | HumanRenderer,
    final: dict[str, Any],
    stop: _Stop,
    progress: _Progress,
) -> int:
    """Start the session and run the prompts; the exit status of the turns."""
    output = renderer.output
    async with contextlib.AsyncExitStack() as stack:
        if request.pool is not None:
            placement = await stack.enter_async_context(
                request.pool.session(
                    request.workspace,
                    request.options,
                    resume=request.resume,
                    wait_for_slot_s=request.wait_for_slot_s,
                    on_wait=_waiting(renderer),
                )
            )
            await _placed(renderer, placement, final)
            session = placement.session
        else:
            session = await stack.enter_async_context(
                open_session(
                    request.workspace, request.options, request.target, resume=request.resume, attach=request.attach
                )
            )
        stop.session = session
        assert session.info is not None
        final.update(session_id=session.session_id, obtained=session.info.obtained)
        # Created here (new, or fell back), else the continued session's time from the history
        # (which the ledger does not keep once it is too old to hold a load).
        progress.created = ORIGINS.created(request.workspace, session.session_id) or (
            progress.resumed_created if session.session_id == request.resume else None
        )
        tokens = progress.tokens

        def record_handle() -> None:  # where `remote-acp attach` finds it, should this process die
            if (handle := session.handle) is not None:
                progress.handle = handle
                _remember(request, {**final, "outcome": "running"}, progress)

        record_handle()
        taken_over = request.attach is not None and request.attach.prompt_id is not None
        prompts: list[str | None] = [None] if taken_over else []
        prompts += request.prompts
        for index, prompt in enumerate(prompts):
            if stop.signals:
                break
            if tokens.reached:
                assert tokens.max_tokens is not None
                left = len(request.prompts) - index
                final.update(
                    outcome="token_ceiling_reached",
                    error_kind="turn_token_limit",
                    cause="token_limit",
                    retryable=False,
                    message=f"the run used {tokens.total} tokens, reaching max_tokens {tokens.max_tokens}: "
                    f"{left} prompt{'s' if left > 1 else ''} not sent",
                )
                return exit_code_for("turn_token_limit")
            # A write waiting for an unread pipe holds the turn where the session cannot apply
            # its bound: give up waiting when the bound is due, so the session can end the turn.
            output.wait_until(time.monotonic() + request.options.turn_timeout_ms / 1000)
            stop.turn_in_flight = True
            turn = await _run_turn(session, prompt, renderer, tokens, record_handle)
            stop.turn_in_flight = False
            output.wait_until(math.inf)
            final["outcome"], final["message"] = turn["outcome"], turn["message"]
            if isinstance(renderer, JsonRenderer):
                renderer.result(turn)
            if turn["error_kind"] is not None:
                final.update(error_kind=turn["error_kind"], cause=turn.get("cause"), retryable=turn["retryable"])
                return exit_code_for(turn["error_kind"], turn.get("cause"))
        if request.detach:
            handle = progress.handle = await session.detach()
            final.update(
                outcome="detached",
                message=f"detached: the host keeps the session for {handle.window_s} s; take it over with "
                f"`remote-acp attach {handle.relay_id}`",
                relay_id=handle.relay_id,
            )
    return EXIT_OK


def _waiting(renderer: JsonRenderer | HumanRenderer) -> Callable[[SlotWait], None] | None:
    """What a person sees while a placed run waits for a slot: a notice now and then."""
    if not isinstance(renderer, HumanRenderer):
        return None
    said = -math.inf

    def waiting(wait: SlotWait) -> None:
        nonlocal said
        if wait.waited_s - said >= 10:  # a line every ten seconds, not one per poll
            said = wait.waited_s
            hosts = ", ".join(wait.full)
            renderer.note_now(
                f"waiting for a free agent slot ({wait.waited_s:.0f} s so far, {wait.left_s:.0f} s left): "
                f"at capacity: {hosts}"
            )

    return waiting


async def _placed(renderer: JsonRenderer | HumanRenderer, placement: Placement, final: dict[str, Any]) -> None:
    """Say where the session was placed, and which hosts failed first."""
    host = placement.host
    final.update(host=host.name, destination=host.destination)
    if isinstance(renderer, JsonRenderer):
        failed = [
            {
                "host": a.host.name,
                "destination": a.host.destination,
                "error_kind": a.error.kind.value,
                "cause": a.error.cause.value,
                "retryable": a.error.retryable,
                "message": str(a.error),
            }
            for a in placement.failed
        ]
        renderer.result({"type": "placement", "host": host.name, "destination": host.destination, "failed": failed})
        return
    for attempt in placement.failed:
        error = attempt.error
        await renderer.note(f"could not start on {attempt.host.name}: [{error.kind}: {error.cause}] {error}")
    await renderer.note(f"running on {host.name} ({host.destination})")


async def run_prompts(request: RunRequest) -> int:
    output = standard_output()
    renderer: JsonRenderer | HumanRenderer = (
        JsonRenderer(output) if request.as_json else HumanRenderer(output, show_replay=request.show_replay)
    )
    final: dict[str, Any] = {
        "type": "run_result",
        "session_id": None,
        "outcome": None,
        "error_kind": None,
        "cause": None,
        "retryable": False,
    }
    stop = _Stop(output)
    output_failed: OutputError | None = None
    code = EXIT_OK
    progress = _Progress(RunTokens(request.max_tokens), resumed_created=_seed_origin(request))
    progress.started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def held(session_id: str, seconds: float) -> None:
        progress.held_s = round(seconds, 3)
        if isinstance(renderer, HumanRenderer):
            renderer.note_now(
                f"waiting {seconds:.1f} s before loading session {session_id}: it was created in this UTC "
                "minute, and a load within the minute of its creation can lose the session's history"
            )

    ORIGINS.on_hold = held
    async with anyio.create_task_group() as tg:
        tg.start_soon(stop.watch)
        with stop.scope:
            try:
                code = await _drive(request, renderer, final, stop, progress)
            except RemoteAcpError as exc:
                _failed(final, exc)
                code = exit_code_for(exc.kind.value, exc.cause.value)
            except OutputError as exc:
                # Whoever read our output went away (`| head`: stop quietly, as a pipeline
                # expects), or the output cannot be written at all (a full disk, a closed stdout).
                output_failed = exc
                final.update(outcome="output_failed", message=str(exc))
                code = EXIT_BROKEN_PIPE if exc.broken_pipe else EXIT_LOCAL_IO
            except Exception as exc:  # a bug: say so in one line, never a traceback
                log.debug("internal error", exc_info=True)
                final.update(outcome="internal_error", message=f"internal error: {_describe(exc)}")
                code = EXIT_INTERNAL
        stop.session = None
        if (stop.scope.cancelled_caught or stop.signals) and output_failed is None:
            if stop.turn_in_flight and isinstance(renderer, JsonRenderer) and final["session_id"]:
                # Stopped mid-turn before the session could end it: the turn still gets its line.
                with contextlib.suppress(OutputError):
                    renderer.result(
                        _turn_line(
                            final["session_id"], "turn_cancelled", "turn_cancelled", "cancelled", False, "interrupted"
                        )
                    )
            final.update(outcome=final["outcome"] or "interrupted", message="interrupted")
            code = EXIT_INTERRUPTED
        ORIGINS.on_hold = None
        if final["outcome"] != "detached":
            progress.handle = None  # the session was ended with the run
        _remember(request, final, progress)
        code = await _finish(renderer, final, code, output_failed, progress)
        tg.cancel_scope.cancel()
    return code


def _failed(final: dict[str, Any], error: RemoteAcpError) -> None:
    """The run's closing line for a session that could not start: the error as data, and, for a
    placement that found no host, every host it tried with its cause."""
    final.update(
        outcome="start_failed",
        error_kind=error.kind.value,
        cause=error.cause.value,
        retryable=error.retryable,
        message=str(error),
        fix=error.fix or None,
    )
    if error.facts.attempts:
        final["placement"] = {"hosts": [attempt.to_json() for attempt in error.facts.attempts]}


def _seed_origin(request: RunRequest) -> datetime | None:
    """Hand the creation time the history kept for the session to resume to the load spacing."""
    if request.resume is None or request.history is None:
        return None
    try:
        created = request.history.created(request.resume, request.workspace)
    except HistoryError as exc:
        log.warning("could not read when the session was created (a load is not spaced): %s", exc)
        return None
    if created is not None:
        ORIGINS.record(request.workspace, request.resume, at=created)
    return created


async def _finish(
    renderer: JsonRenderer | HumanRenderer,
    final: dict[str, Any],
    code: int,
    failed: OutputError | None,
    progress: _Progress,
) -> int:
    """Write the closing line and wait, bounded, for the output to reach its reader."""
    output = renderer.output
    if failed is None:
        try:
            if isinstance(renderer, JsonRenderer):
                renderer.result({**final, "tokens": progress.tokens.to_json(), "load_held_s": progress.held_s})
                if final["outcome"] == "internal_error":
                    _say(output, final["message"])
            else:
                for note in progress.tokens.summary():
                    renderer.last_note(note)
                line = f"session {final['session_id'] or '-'}: {final['outcome']}"
                if final["error_kind"]:
                    said = f"{final['error_kind']}: {final['cause']}" if final["cause"] else final["error_kind"]
                    line += f" [{said}] {final.get('message', '')}"
                elif final["outcome"] in ("internal_error", "detached"):
                    line += f" ({final['message']})"
                renderer.last_note(line)
                if final.get("fix"):
                    renderer.last_note(f"fix: {final['fix']}")
            await output.out.drain(FINAL_IDLE_S)
        except OutputError as exc:
            failed = exc
            code = EXIT_BROKEN_PIPE if exc.broken_pipe else EXIT_LOCAL_IO
    if failed is not None and not failed.broken_pipe:
        _say(output, str(failed))
    if output.dropped:
        _say(output, f"{output.dropped} pieces of output were dropped: nobody read them while the run had to end")
    with contextlib.suppress(OutputError):
        await output.err.drain(FINAL_IDLE_S)
    return code


def _this_run() -> str | None:
    """This process as a record names it (see :attr:`SessionRecord.run`)."""
    ref, boot = process_ref(os.getpid()), boot_id()
    return None if ref is None or boot is None else f"{ref.pid} {ref.start_time} {boot}"


def _remember(request: RunRequest, final: dict[str, Any], progress: _Progress) -> None:
    """Record the session for ``sessions``, ``--resume`` and ``attach``; never fails the run (a
    warning). A session that may still be on its host (running, detached, or this process
    stopped mid-way) keeps its handle in the record."""
    if request.history is None or not final["session_id"]:
        return
    created, handle = progress.created, progress.handle
    options = request.options
    agent = options.command if isinstance(options.command, str) else " ".join(options.command)
    record = SessionRecord(
        session_id=final["session_id"],
        agent=agent,
        target=final.get("destination") or (request.target.label if request.target is not None else "local"),
        workspace=request.workspace,
        when=progress.started,
        outcome="expired" if final.get("cause") == "session_expired" else final["outcome"] or "started",
        error_kind=final["error_kind"],
        obtained=final.get("obtained", "new"),
        created=created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if created is not None else None,
        handle=handle.to_json() if handle is not None else None,
        run=_this_run() if handle is not None else None,
    )
    try:
        request.history.add(record)
    except Exception as exc:  # the run itself succeeded or failed on its own account
        log.warning("could not record the session: %s", exc if isinstance(exc, HistoryError) else _describe(exc))

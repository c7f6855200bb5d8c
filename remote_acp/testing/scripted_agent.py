"""A scriptable ACP agent for tests and demos (stdlib only, cheap to start).

Run it as ``python -m remote_acp.testing.scripted_agent [options]`` or ``remote-acp-scripted-agent``.
It speaks the Agent Client Protocol (newline-delimited JSON-RPC 2.0) on stdin/stdout and logs to
stderr only. Start-level options (``--help``) script the handshake and process-level faults; the
words of each prompt script the turn. Prompt tokens starting with ``@`` are directives, the other
words (joined by single spaces) are the reply text (default ``ok``). ``--script`` sets default
directives for every turn; a prompt directive overrides the default of the same name. A flag
directive takes an optional value: ``@never=0`` switches a default off.

Directives, run in this order within a turn:

- ``@drip=N`` (with ``@drip-ms=MS``, default 100): N agent_message_chunk updates ``chunk-0001 ``,
  ``chunk-0002 `` ... (numbered from 1, four digits at least), one every MS milliseconds, the first
  at once: a turn that streams over time. The turn then goes on as scripted (``@chunks=0``: no
  reply after them); a ``session/cancel`` ends it between two chunks.
- ``@sleep=SECONDS``: wait first (a ``session/cancel`` ends the turn at once, as ``cancelled``).
- ``@unknown-notification``: a ``vendor/notify`` notification with params ``{"x": 1}``.
- ``@foreign``: an agent_message_chunk ("foreign text") for session ``other-session``.
- ``@unknown-update``: a session/update whose ``sessionUpdate`` is ``mystery_update``.
- ``@thought``: an agent_thought_chunk "thinking".
- ``@plan``: a plan update with two entries.
- ``@tool`` / ``@tool-fail``: tool_call ``call-1`` then a tool_call_update, completed / failed.
- ``@permission``: session/request_permission (options allow, allow-always, reject-always,
  reject); waits for the answer, then says ``permission outcome: selected <optionId>`` (or
  ``permission outcome: <outcome>``, ``permission outcome: error <code>``).
- ``@vendor-request``: a ``craft/drainMidTurnQueue`` request; waits for the answer, then says
  ``vendor request answered: result`` or ``vendor request answered: error <code>``.
- ``@write=PATH``: ``fs/write_text_file`` of the reply text; says ``wrote`` or ``write error CODE: MESSAGE``.
- ``@read=PATH`` (with ``@read-line=N``, ``@read-limit=N``): ``fs/read_text_file``; says ``read: CONTENT``
  or ``read error CODE: MESSAGE`` (sent whether or not the client advertised the capability).
- ``@garbage``: the raw stdout line ``this is not json``.
- ``@long-line=BYTES``: one stdout line of BYTES bytes (a JSON string of ``a``), written in 64 KiB pieces.
- ``@chunks=N`` (default 1): the reply as N agent_message_chunk updates sharing messageId
  ``msg-<turn>`` (``@chunks=0``: no reply). ``@bulk=N`` instead sends N chunks of text ``x``.
- ``@usage``: a usage_update ``{used: 10, size: 100}`` after the reply.
- ``@crash=CODE``: after the reply, write "crashing mid-turn" to stderr and exit with CODE.
- ``@exit-holding-stdout``: spawn a sleeping child that keeps stdout open, then exit 0.
- ``@stop-reading``: a request_permission with a 4 MiB optionId, then stop reading stdin for good.
- ``@never``: never answer the prompt (a cancel is still answered ``cancelled``).
- ``@error=CODE``: answer the prompt with that JSON-RPC error ("scripted failure"; for ``-32000``
  "Authentication required: ..."), whose ``data`` is ``--error-data``; otherwise answer
  ``{"stopReason": R}`` with R from ``@stop=R`` (default ``end_turn``).
- ``@ignore-cancel``: ``session/cancel`` is ignored for this turn.
- ``@mcp-servers``: the reply is ``mcp servers: NAME(TRANSPORT:ENV+NAMES),...`` for the
  tool servers the session's latest session/new, load or resume carried (``none``); the names
  of env variables and headers, never their values.

A ``session/cancel`` (unless ``@ignore-cancel``) answers the turn with ``cancelled`` the moment
it arrives, abandoning the rest of the turn.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from remote_acp.testing._agent import (
    ADVERTISABLE,
    AUTH_MESSAGE,
    AUTH_REQUIRED,
    SCRIPTED_FAILURE,
    Options,
    ScriptedAgent,
    Turn,
)
from remote_acp.testing._messages import sleep_steps
from remote_acp.testing._process import TYPE_CHECKING, hard_exit, spawn_sleeper, write_text
from remote_acp.testing._script import Script, build_plan, drip_text
from remote_acp.testing._wire import PIECE, StdinReader, Wire

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence
    from typing import Any, NoReturn

    from remote_acp.testing._messages import Wait
    from remote_acp.testing._wire import Json

__all__ = ["main"]

FAULT_METHODS = {"initialize": "initialize", "new": "session/new"}


# --------------------------------------------------------------------------- command line


def _error_spec(text: str) -> tuple[int, str]:
    code_text, sep, message = text.partition(":")
    code = int(code_text)
    if not sep:
        message = AUTH_MESSAGE if code == AUTH_REQUIRED else SCRIPTED_FAILURE
    return code, message


def _json(text: str) -> Any:
    return json.loads(text)


def _auth_method(text: str) -> dict[str, Any]:
    method = json.loads(text)
    if not isinstance(method, dict):
        raise ValueError("an auth method is a JSON object")
    return method


def _delay(text: str) -> tuple[str, float]:
    method, sep, seconds = text.partition("=")
    if not sep or not method or not float(seconds) >= 0:
        raise ValueError(f"expected METHOD=SECONDS, got {text!r}")
    return FAULT_METHODS.get(method, method), float(seconds)


def _advertised(text: str) -> frozenset[str]:
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    unknown = names - set(ADVERTISABLE)
    if unknown:
        raise ValueError(f"unknown capabilities: {', '.join(sorted(unknown))}")
    return names


def _transports(text: str) -> frozenset[str]:
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    if names - {"http", "sse"}:
        raise ValueError(f"unknown tool-server transports: {', '.join(sorted(names - {'http', 'sse'}))}")
    return names


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="remote-acp-scripted-agent",
        description="A scriptable ACP agent on stdio (see the module docstring for prompt directives).",
        epilog="For a negative error code with a message, attach the value: --init-error=-32001:text.",
        allow_abbrev=False,
    )
    p.add_argument("--name", default="scripted-agent", help="agentInfo.name")
    p.add_argument("--agent-version", default="1.0.0", help="agentInfo.version")
    p.add_argument("--no-agent-info", action="store_true", help="omit agentInfo from initialize")
    p.add_argument("--protocol-version", type=int, default=1, help="version answered to initialize")
    p.add_argument(
        "--advertise",
        type=_advertised,
        default=frozenset(),
        metavar="LIST",
        help="comma-separated from " + ",".join(ADVERTISABLE),
    )
    p.add_argument(
        "--mcp",
        type=_transports,
        default=frozenset(),
        metavar="LIST",
        help="mcpCapabilities to answer true, comma-separated from http,sse (default: none)",
    )
    p.add_argument("--init-error", type=_error_spec, metavar="CODE[:MESSAGE]", help="fail initialize")
    p.add_argument("--new-error", type=_error_spec, metavar="CODE[:MESSAGE]", help="fail session/new")
    p.add_argument(
        "--crash-at", metavar="METHOD", help="exit on receiving this request (initialize, new, or any method name)"
    )
    p.add_argument("--exit-code", type=int, default=3, help="exit code for --crash-at (default 3)")
    p.add_argument("--stderr", default="scripted crash", metavar="TEXT", help="stderr text for --crash-at")
    p.add_argument(
        "--never-answer", metavar="METHOD", help="never answer this request (initialize, new, or any method name)"
    )
    p.add_argument(
        "--answer-after",
        type=_delay,
        action="append",
        default=[],
        metavar="METHOD=SECONDS",
        help="wait SECONDS, reading nothing, before handling METHOD (initialize, new, or any method name)",
    )
    p.add_argument("--error-data", type=_json, metavar="JSON", help="the data of every scripted error answer")
    p.add_argument(
        "--auth-method",
        type=_auth_method,
        action="append",
        default=[],
        metavar="JSON",
        help="an entry of initialize's authMethods (an object with id, name, description)",
    )
    p.add_argument("--load-error", type=_error_spec, metavar="CODE[:MESSAGE]", help="fail session/load")
    p.add_argument("--resume-error", type=_error_spec, metavar="CODE[:MESSAGE]", help="fail session/resume")
    p.add_argument(
        "--load-replay",
        choices=("before", "after", "none"),
        default="before",
        help="replay history before answering session/load (the protocol's rule), after it, or not at all",
    )
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="keep sessions (cwd and history) in DIR, so a later process can load or resume them",
    )
    p.add_argument("--ignore-sigterm", action="store_true", help="ignore SIGTERM")
    p.add_argument(
        "--stdin-eof-exit",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="exit 0 when stdin reaches EOF (default: yes)",
    )
    p.add_argument("--stderr-flood", type=int, default=0, metavar="BYTES", help="stderr bytes at start")
    p.add_argument("--stderr-line", action="append", default=[], metavar="TEXT", help="stderr line at start")
    p.add_argument("--child", choices=["hold-stdout", "setsid"], help="spawn a sleeping child at start")
    p.add_argument("--child-pid-file", metavar="PATH", help="where to write the child's pid")
    p.add_argument("--pid-file", metavar="PATH", help="where to write our pid")
    p.add_argument("--env-dump", metavar="PATH", help="write the environment (and __cwd__) as JSON")
    p.add_argument("--record", metavar="PATH", help="append every received line to PATH")
    p.add_argument(
        "--script",
        default="",
        metavar="DIRECTIVES",
        help="default directives for every turn (its plain words: the default reply)",
    )
    p.add_argument("--session-id", metavar="ID", help="id answered to the first session/new")
    return p


def parse_options(argv: Sequence[str] | None) -> tuple[Options, argparse.Namespace]:
    parser = _parser()
    args = parser.parse_args(argv)
    script = Script.parse(args.script)
    try:
        build_plan(Script(script.words, ()), script)
    except ValueError as exc:
        parser.error(f"--script: {exc}")
    options = Options(
        name=args.name,
        version=args.agent_version,
        agent_info=not args.no_agent_info,
        protocol_version=args.protocol_version,
        advertise=args.advertise,
        init_error=args.init_error,
        new_error=args.new_error,
        crash_at=FAULT_METHODS.get(args.crash_at, args.crash_at),
        exit_code=args.exit_code,
        crash_stderr=args.stderr,
        never_answer=FAULT_METHODS.get(args.never_answer, args.never_answer),
        load_error=args.load_error,
        resume_error=args.resume_error,
        load_replay=args.load_replay,
        state_dir=args.state_dir,
        stdin_eof_exit=args.stdin_eof_exit,
        child_pid_file=args.child_pid_file,
        session_id=args.session_id,
        script=script,
        mcp_transports=args.mcp,
        error_data=args.error_data,
        auth_methods=tuple(args.auth_method),
        answer_after=dict(args.answer_after),
    )
    return options, args


def flood_stderr(size: int) -> None:
    """Write ``size`` bytes of 100-byte ``xxx...\\n`` lines to stderr."""
    line = b"x" * 99 + b"\n"
    batch = line * (PIECE // len(line))
    out = sys.stderr.buffer
    sys.stderr.flush()
    full, rest = divmod(size, len(batch))
    for _ in range(full):
        out.write(batch)
    if rest:
        out.write(batch[: rest - 1] + b"\n")
    out.flush()


def start_up(args: argparse.Namespace) -> None:
    """The start-level side effects, in order: signals, files, stderr, child."""
    if args.ignore_sigterm:
        import signal  # here, not at the top: only this option needs it (it builds enums at import)

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.pid_file:
        write_text(args.pid_file, f"{os.getpid()}\n")
    if args.env_dump:
        write_text(args.env_dump, json.dumps({**os.environ, "__cwd__": os.getcwd()}))
    for line in args.stderr_line:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()
    if args.stderr_flood > 0:
        flood_stderr(args.stderr_flood)
    if args.child:
        setsid = args.child == "setsid"
        spawn_sleeper(new_session=setsid, keep_stderr=setsid, pid_file=args.child_pid_file)


class DrippingAgent(ScriptedAgent):
    """The scripted agent, with ``@drip`` run before the rest of each turn."""

    def _run_turn(self, turn: Turn, prompt_text: str) -> Generator[Wait, Json | None, Json]:
        plan, sid = turn.plan, turn.session.session_id
        for index in range(1, plan.drip + 1):
            if index > 1:
                yield from sleep_steps(plan.drip_ms / 1000)
            self._say(sid, drip_text(index), turn.message_id)
        return (yield from super()._run_turn(turn, prompt_text))


def main(argv: Sequence[str] | None = None) -> NoReturn:
    options, args = parse_options(argv)
    try:
        start_up(args)
        reader = StdinReader(0, args.record)  # fd 0, read raw (works even if sys.stdin is None)
        reader.start()
        DrippingAgent(options, Wire(sys.stdout.buffer), reader).serve()
    except KeyboardInterrupt:
        hard_exit(130)
    except BrokenPipeError:
        hard_exit(0)


if __name__ == "__main__":
    main()

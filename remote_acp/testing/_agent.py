"""The scripted agent: method handlers, turns as generators, sessions and their state directory."""

from __future__ import annotations

import os
import queue
import sys
import time
from types import SimpleNamespace

from remote_acp.testing._messages import (
    PLAN_ENTRIES,
    Wait,
    chunk_message,
    describe_answer,
    describe_servers,
    forever,
    huge_permission_params,
    long_line,
    permission_params,
    sleep_steps,
    split_text,
    text_block,
)
from remote_acp.testing._process import TYPE_CHECKING, hard_exit, log, spawn_sleeper
from remote_acp.testing._script import Script, build_plan
from remote_acp.testing._sessions import AgentSession, restore_session, save_session
from remote_acp.testing._wire import RpcError, encode

if TYPE_CHECKING:
    from collections.abc import Callable, Generator
    from typing import Any, NoReturn, TypeAlias

    from remote_acp.testing._script import TurnPlan
    from remote_acp.testing._wire import Json, StdinReader, Wire

AGENT_TITLE = "Scripted ACP agent"
ADVERTISABLE = ("load", "resume", "close", "delete", "list")
SCRIPTED_FAILURE = "scripted failure"
AUTH_REQUIRED = -32000
AUTH_MESSAGE = "Authentication required: scripted credential refusal"
BULK_BATCH = 1000


class Options(SimpleNamespace):
    """The start-level options, as :func:`~remote_acp.testing.scripted_agent.parse_options` reads them."""

    name: str
    version: str
    agent_info: bool
    protocol_version: int
    advertise: frozenset[str]
    init_error: tuple[int, str] | None
    new_error: tuple[int, str] | None
    crash_at: str | None
    exit_code: int
    crash_stderr: str
    never_answer: str | None
    load_error: tuple[int, str] | None
    resume_error: tuple[int, str] | None
    load_replay: str
    state_dir: str | None
    stdin_eof_exit: bool
    child_pid_file: str | None
    session_id: str | None
    script: Script
    mcp_transports: frozenset[str] = frozenset()
    """``mcpCapabilities`` answered true (``http``, ``sse``); stdio is always taken."""
    error_data: Json | None = None
    """``data`` of every scripted error answer (start-up errors and ``@error``)."""
    auth_methods: tuple[Json, ...] = ()
    """``authMethods`` answered to ``initialize``."""
    answer_after: dict[str, float] = {}  # set per instance by parse_options
    """Seconds to wait, doing nothing else, before handling a request of each method."""


if TYPE_CHECKING:
    Steps: TypeAlias = Generator[Wait, Json | None, Json]


class Turn:
    __slots__ = ("number", "plan", "request_id", "session", "steps", "wait")

    def __init__(self, number: int, request_id: Any, session: AgentSession, plan: TurnPlan) -> None:
        self.number = number
        self.request_id = request_id
        self.session = session
        self.plan = plan
        self.steps: Steps | None = None
        self.wait = Wait()

    @property
    def message_id(self) -> str:
        return f"msg-{self.number}"


class ScriptedAgent:
    """Single-threaded ACP agent: one loop pulls messages from the reader and resumes turns."""

    def __init__(self, options: Options, wire: Wire, reader: StdinReader) -> None:
        self.options = options
        self.wire = wire
        self.reader = reader
        self.sessions: dict[str, AgentSession] = {}
        self.turns: dict[int, Turn] = {}
        self.turn_count = 0
        self.session_count = 0

    # ---- main loop

    def serve(self) -> NoReturn:
        while True:
            try:
                message = self.reader.get(self._timeout())
            except queue.Empty:
                pass
            else:
                if message is None:
                    self._on_eof()
                else:
                    self.handle(message)
            self._fire_timers()

    def _timeout(self) -> float | None:
        deadlines = [t.wait.deadline for t in self.turns.values() if t.wait.deadline is not None]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def _fire_timers(self) -> None:
        now = time.monotonic()
        for turn in list(self.turns.values()):
            if turn.wait.deadline is not None and turn.wait.deadline <= now:
                self._advance(turn, None)

    def _on_eof(self) -> None:
        if self.options.stdin_eof_exit:
            hard_exit(0)
        log("stdin reached EOF; staying alive (--no-stdin-eof-exit)")

    def handle(self, message: Json) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            if "id" in message:
                self._on_answer(message)
            else:
                log(f"ignoring message without method or id: {message!r:.200}")
            return
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            self._on_notification(method, params)
            return
        self._on_request(message["id"], method, params)

    def _on_request(self, request_id: Any, method: str, params: Json) -> None:
        if method == self.options.crash_at:
            sys.stderr.write(self.options.crash_stderr + "\n")
            hard_exit(self.options.exit_code)
        if method == self.options.never_answer:
            log(f"never answering {method} (id {request_id!r})")
            return
        if (delay := self.options.answer_after.get(method)) is not None:
            time.sleep(delay)  # a runtime busy starting up: it reads nothing meanwhile
        handler = REQUESTS.get(method)
        try:
            if handler is None:
                raise RpcError(-32601, "Method not found", {"method": method})
            result = handler(self, request_id, params)
        except RpcError as error:
            self.wire.fail(request_id, error)
            return
        if result is not None:
            self.wire.respond(request_id, result)

    def _on_notification(self, method: str, params: Json) -> None:
        if method == "session/cancel":
            self.cancel(str(params.get("sessionId")), forced=False)

    def _on_answer(self, message: Json) -> None:
        answer_id = message["id"]
        if type(answer_id) is int:  # our ids are ints; True == 1 must not match
            for turn in list(self.turns.values()):
                if turn.wait.request_id == answer_id:
                    self._advance(turn, message)
                    return
        log(f"ignoring answer to unknown or finished request {answer_id!r}")

    # ---- turn scheduling

    def _advance(self, turn: Turn, value: Json | None) -> None:
        assert turn.steps is not None
        try:
            turn.wait = turn.steps.send(value)
        except StopIteration as stop:
            self._finish(turn)
            self.wire.respond(turn.request_id, stop.value)
        except RpcError as error:
            self._finish(turn)
            self.wire.fail(turn.request_id, error)

    def _finish(self, turn: Turn) -> None:
        self.turns.pop(turn.number, None)

    def cancel(self, session_id: str, *, forced: bool) -> None:
        for turn in list(self.turns.values()):
            if turn.session.session_id != session_id:
                continue
            if turn.plan.ignore_cancel and not forced:
                log(f"ignoring session/cancel for turn {turn.number} (@ignore-cancel)")
                continue
            assert turn.steps is not None
            turn.steps.close()
            self._finish(turn)
            self.wire.respond(turn.request_id, {"stopReason": "cancelled"})

    # ---- requests

    def fail(self, spec: tuple[int, str]) -> NoReturn:
        raise RpcError(*spec, self.options.error_data)

    def initialize(self, request_id: Any, params: Json) -> Json:
        if self.options.init_error:
            self.fail(self.options.init_error)
        capabilities: Json = {
            "loadSession": "load" in self.options.advertise,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
            "mcpCapabilities": {name: name in self.options.mcp_transports for name in ("http", "sse")},
        }
        extras = [name for name in ADVERTISABLE[1:] if name in self.options.advertise]
        if extras:
            capabilities["sessionCapabilities"] = {name: {} for name in extras}
        result: Json = {
            "protocolVersion": self.options.protocol_version,
            "agentCapabilities": capabilities,
            "authMethods": list(self.options.auth_methods),
        }
        if self.options.agent_info:
            result["agentInfo"] = {
                "name": self.options.name,
                "title": AGENT_TITLE,
                "version": self.options.version,
            }
        return result

    def new_session(self, request_id: Any, params: Json) -> Json:
        if self.options.new_error:
            self.fail(self.options.new_error)
        cwd = self._check_cwd(params)
        self.session_count += 1
        if self.options.state_dir:  # ids stay unique across the processes sharing the directory
            self.session_count = max(self.session_count, len(os.listdir(self.options.state_dir)) + 1)
        session_id = self.options.session_id or "sess"
        if self.session_count > 1 or not self.options.session_id:
            session_id = f"{session_id}-{self.session_count}"
        self.sessions[session_id] = AgentSession(session_id, cwd, mcp_servers=params["mcpServers"])
        self._save(self.sessions[session_id])
        return {"sessionId": session_id}

    def load_session(self, request_id: Any, params: Json) -> Json | None:
        self._require_capability("load", "session/load")
        if self.options.load_error:
            self.fail(self.options.load_error)
        self._check_cwd(params)
        session = self._session(params)
        session.mcp_servers = params["mcpServers"]
        if self.options.load_replay == "after":
            self.wire.respond(request_id, {})
        if self.options.load_replay != "none":
            for prompt, reply, message_id in session.history:
                self._update(session.session_id, "user_message_chunk", content=text_block(prompt))
                if reply:
                    self._say(session.session_id, reply, message_id)
        return None if self.options.load_replay == "after" else {}

    def resume_session(self, request_id: Any, params: Json) -> Json:
        self._require_capability("resume", "session/resume")
        if self.options.resume_error:
            self.fail(self.options.resume_error)
        servers = params.get("mcpServers", [])
        if not isinstance(servers, list):
            raise RpcError(-32602, "Invalid params: mcpServers must be a list")
        self._session(params).mcp_servers = servers
        return {}

    def close_session(self, request_id: Any, params: Json) -> Json:
        self.cancel(str(params.get("sessionId")), forced=True)
        return {}

    def delete_session(self, request_id: Any, params: Json) -> Json:
        session_id = str(params.get("sessionId"))
        self.cancel(session_id, forced=True)
        self.sessions.pop(session_id, None)
        return {}

    def list_sessions(self, request_id: Any, params: Json) -> Json:
        self._require_capability("list", "session/list")
        return {"sessions": [{"sessionId": s.session_id, "cwd": s.cwd} for s in self.sessions.values()]}

    def prompt(self, request_id: Any, params: Json) -> None:
        """Start a turn; the turn answers the request itself, now or later."""
        session = self._session(params)
        blocks = params.get("prompt")
        if not isinstance(blocks, list):
            raise RpcError(-32602, "Invalid params: prompt must be a list of content blocks")
        text = "\n".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
        try:
            plan = build_plan(Script.parse(text), self.options.script)
        except ValueError as exc:
            raise RpcError(-32602, f"Invalid params: {exc}") from None
        self.turn_count += 1
        turn = Turn(self.turn_count, request_id, session, plan)
        turn.steps = self._run_turn(turn, text)
        self.turns[turn.number] = turn
        self._advance(turn, None)

    def _check_cwd(self, params: Json) -> str:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcError(-32602, "Invalid params: cwd must be an absolute path")
        if not isinstance(params.get("mcpServers"), list):
            raise RpcError(-32602, "Invalid params: mcpServers must be a list")
        return cwd

    def _session(self, params: Json) -> AgentSession:
        session_id = str(params.get("sessionId"))
        session = self.sessions.get(session_id) or self._restore(session_id)
        if session is None:
            raise RpcError(-32002, "session not found", {"sessionId": params.get("sessionId")})
        return session

    def _save(self, session: AgentSession) -> None:
        save_session(self.options.state_dir, session)

    def _restore(self, session_id: str) -> AgentSession | None:
        session = restore_session(self.options.state_dir, session_id)
        if session is not None:
            self.sessions[session_id] = session
        return session

    def _require_capability(self, capability: str, method: str) -> None:
        if capability not in self.options.advertise:
            raise RpcError(-32601, "Method not found", {"method": method})

    # ---- the turn itself

    def _run_turn(self, turn: Turn, prompt_text: str) -> Steps:
        plan, sid = turn.plan, turn.session.session_id
        if plan.sleep > 0:
            yield from sleep_steps(plan.sleep)
        self._side_updates(plan, sid)
        if plan.permission:
            answer = yield from self._ask(permission_params(sid))
            outcome = describe_answer(answer)[1]
            self._say(sid, f"permission outcome: {outcome}", f"{turn.message_id}-permission")
        if plan.vendor_request:
            answer = yield from self._ask({}, method="craft/drainMidTurnQueue")
            kind, code = describe_answer(answer)
            said = f"error {code}" if kind == "error" else "result"
            self._say(sid, f"vendor request answered: {said}", f"{turn.message_id}-vendor")
        if plan.read is not None or plan.write is not None:
            yield from self._files(turn)
        if plan.garbage:
            self.wire.write([b"this is not json\n"])
        if plan.garbage_lines:
            self.wire.write([b"this is not json\n" * plan.garbage_lines])
        if plan.long_line:
            self.wire.write(long_line(plan.long_line))
        reply = self._reply(turn)
        turn.session.history.append((prompt_text, reply, turn.message_id))
        self._save(turn.session)
        if plan.usage:
            self._update(sid, "usage_update", used=10, size=100)
        self._exits(plan)
        if plan.stop_reading:
            self.wire.request("session/request_permission", huge_permission_params(sid))
            self.reader.stop_reading()
            yield from forever()
        if plan.never:
            yield from forever()
        if plan.error is not None:
            self.fail((plan.error, AUTH_MESSAGE if plan.error == AUTH_REQUIRED else SCRIPTED_FAILURE))
        return {"stopReason": os.environ.get(plan.stop_from, "") if plan.stop_from else plan.stop}

    def _files(self, turn: Turn) -> Generator[Wait, Json | None, None]:
        """``@read`` / ``@write``: ask the client, then say ``read: <content>``, ``wrote``, or
        ``read error <code>: <message>`` (``write error ...``)."""
        plan, sid = turn.plan, turn.session.session_id
        for verb, path in (("write", plan.write), ("read", plan.read)):
            if path is None:
                continue
            params: Json = {"sessionId": sid, "path": path}
            if verb == "write":
                params["content"] = plan.reply
            else:
                params.update({k: v for k, v in (("line", plan.read_line), ("limit", plan.read_limit)) if v})
            answer = yield from self._ask(params, method=f"fs/{verb}_text_file")
            error = answer.get("error")
            if isinstance(error, dict):
                said = f"{verb} error {error.get('code')}: {error.get('message')}"
            elif verb == "read":
                result = answer.get("result")
                content = result.get("content") if isinstance(result, dict) else None
                said = f"read: {content}" if isinstance(content, str) else f"read: no content in {result!r}"
            else:
                said = "wrote"
            self._say(sid, said, f"{turn.message_id}-{verb}")

    def _side_updates(self, plan: TurnPlan, sid: str) -> None:
        if plan.unknown_notification:
            self.wire.notify("vendor/notify", {"x": 1})
        if plan.foreign:
            self._say("other-session", "foreign text", "msg-foreign")
        if plan.unknown_update:
            self._update(sid, "mystery_update", mystery=True)
        if plan.thought:
            self._update(sid, "agent_thought_chunk", content=text_block("thinking"))
        if plan.plan:
            self._update(sid, "plan", entries=PLAN_ENTRIES)
        if plan.tool is not None:
            title = "Read README.md" if plan.tool == "completed" else "Read failed"
            self._update(sid, "tool_call", toolCallId="call-1", title="Read file", kind="read", status="pending")
            self._update(sid, "tool_call_update", toolCallId="call-1", status=plan.tool, title=title)
        if plan.title_from:
            title = os.environ.get(plan.title_from, "")
            self._update(sid, "tool_call", toolCallId="call-q", title=title, kind="read", status="pending")
            self._update(sid, "tool_call_update", toolCallId="call-q", status="completed")
        if plan.update_from:
            self._update(sid, os.environ.get(plan.update_from, ""))
        if plan.long_tool_id:
            call_id = "t" * plan.long_tool_id
            self._update(sid, "tool_call", toolCallId=call_id, title="Read", kind="read", status="completed")

    def _reply(self, turn: Turn) -> str:
        sid, plan = turn.session.session_id, turn.plan
        if plan.mcp_servers:
            text = f"mcp servers: {describe_servers(turn.session.mcp_servers)}"
            self._say(sid, text, turn.message_id)
            return text
        if plan.say_from:
            text = os.environ.get(plan.say_from, "")
            pieces = [text[i : i + 3] for i in range(0, len(text), 3)]  # as a model streams a quote
            for piece in pieces:
                self._say(sid, piece, turn.message_id)
            return text
        if plan.bulk is None:
            pieces = split_text(plan.reply, plan.chunks)
            for piece in pieces:
                self._say(sid, piece, turn.message_id)
            return "".join(pieces)
        line = encode(chunk_message(sid, "x", turn.message_id))
        full, rest = divmod(plan.bulk, BULK_BATCH)
        batch = line * BULK_BATCH
        self.wire.write([batch] * full + [line * rest])
        return "x" * plan.bulk

    def _exits(self, plan: TurnPlan) -> None:
        if plan.crash is not None:
            sys.stderr.write("crashing mid-turn\n")
            hard_exit(plan.crash)
        if plan.exit_holding_stdout:
            pid = spawn_sleeper(new_session=False, keep_stderr=False, pid_file=self.options.child_pid_file)
            log(f"exiting while child {pid} holds stdout")
            hard_exit(0)

    def _ask(self, params: Json, method: str = "session/request_permission") -> Generator[Wait, Json | None, Json]:
        request_id = self.wire.request(method, params)
        while True:
            answer = yield Wait(request_id=request_id)
            if answer is not None:
                return answer

    def _update(self, sid: str, variant: str, **fields: Any) -> None:
        self.wire.notify("session/update", {"sessionId": sid, "update": {"sessionUpdate": variant, **fields}})

    def _say(self, sid: str, text: str, message_id: str) -> None:
        self.wire.send(chunk_message(sid, text, message_id))


REQUESTS: dict[str, Callable[[ScriptedAgent, Any, Json], Json | None]] = {
    "initialize": ScriptedAgent.initialize,
    "session/new": ScriptedAgent.new_session,
    "session/load": ScriptedAgent.load_session,
    "session/resume": ScriptedAgent.resume_session,
    "session/close": ScriptedAgent.close_session,
    "session/delete": ScriptedAgent.delete_session,
    "session/list": ScriptedAgent.list_sessions,
    "session/prompt": ScriptedAgent.prompt,
}

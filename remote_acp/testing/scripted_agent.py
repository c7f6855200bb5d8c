"""A scriptable ACP agent for tests and demos (stdlib only, cheap to start).

Run it as ``python -m remote_acp.testing.scripted_agent [options]`` or ``remote-acp-scripted-agent``.
It speaks the Agent Client Protocol (newline-delimited JSON-RPC 2.0) on stdin/stdout and logs to
stderr only. Start-level options (``--help``) script the handshake and process-level faults; the
words of each prompt script the turn. Prompt tokens starting with ``@`` are directives, the other
words (joined by single spaces) are the reply text (default ``ok``). ``--script`` sets default
directives for every turn; a prompt directive overrides the default of the same name. A flag
directive takes an optional value: ``@never=0`` switches a default off.

Directives, run in this order within a turn:

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
- ``@garbage``: the raw stdout line ``this is not json``.
- ``@long-line=BYTES``: one stdout line of BYTES bytes (a JSON string of ``a``), written in 64 KiB pieces.
- ``@chunks=N`` (default 1): the reply as N agent_message_chunk updates sharing messageId
  ``msg-<turn>`` (``@chunks=0``: no reply). ``@bulk=N`` instead sends N chunks of text ``x``.
- ``@usage``: a usage_update ``{used: 10, size: 100}`` after the reply.
- ``@crash=CODE``: after the reply, write "crashing mid-turn" to stderr and exit with CODE.
- ``@exit-holding-stdout``: spawn a sleeping child that keeps stdout open, then exit 0.
- ``@stop-reading``: a request_permission with a 4 MiB optionId, then stop reading stdin for good.
- ``@never``: never answer the prompt (a cancel is still answered ``cancelled``).
- ``@error=CODE``: answer the prompt with that JSON-RPC error ("scripted failure"); otherwise
  answer ``{"stopReason": R}`` with R from ``@stop=R`` (default ``end_turn``).
- ``@ignore-cancel``: ``session/cancel`` is ignored for this turn.

A ``session/cancel`` (unless ``@ignore-cancel``) answers the turn with ``cancelled`` the moment
it arrives, abandoning the rest of the turn.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, TypeAlias

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Generator, Iterable, Sequence

__all__ = ["main"]

Json = dict[str, Any]

AGENT_TITLE = "Scripted ACP agent"
ADVERTISABLE = ("load", "resume", "close", "delete", "list")
FAULT_METHODS = {"initialize": "initialize", "new": "session/new"}
AUTH_REQUIRED = -32000
AUTH_MESSAGE = "Authentication required: scripted credential refusal"
SCRIPTED_FAILURE = "scripted failure"
PIECE = 64 * 1024
BULK_BATCH = 1000
HUGE_OPTION_ID_CHARS = 4 * 1024 * 1024
SLEEPER_CODE = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_DFL); time.sleep(600)"

_children: list[object] = []  # keeps Popen objects alive: no "still running" warning at exit


# --------------------------------------------------------------------------- process helpers


def log(message: str) -> None:
    """Write one human-readable line to stderr; never fails."""
    try:
        sys.stderr.write(f"scripted-agent: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def hard_exit(code: int) -> NoReturn:
    """Flush what can be flushed and leave at once (no atexit, no thread joins)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def spawn_sleeper(*, new_session: bool, keep_stderr: bool, pid_file: str | None) -> int:
    """Start a child that sleeps 600 s holding our stdout (and stderr if asked)."""
    import subprocess

    child = subprocess.Popen(
        [sys.executable, "-c", SLEEPER_CODE],
        stdin=subprocess.DEVNULL,
        stderr=None if keep_stderr else subprocess.DEVNULL,
        start_new_session=new_session,
    )
    _children.append(child)
    if pid_file:
        write_text(pid_file, f"{child.pid}\n")
    return child.pid


def write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


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


# --------------------------------------------------------------------------- wire


class RpcError(Exception):
    """Raised by a handler or a turn: answered as a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Json | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def encode(message: Json) -> bytes:
    """One compact JSON-RPC 2.0 line."""
    return json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")).encode("utf-8") + b"\n"


class Wire:
    """The only writer of stdout: one compact JSON message per line."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._next_id = 0

    def write(self, pieces: Iterable[bytes]) -> None:
        try:
            for piece in pieces:
                self._stream.write(piece)
            self._stream.flush()
        except (OSError, ValueError):  # BrokenPipeError: the client went away
            hard_exit(0)

    def send(self, message: Json) -> None:
        self.write([encode(message)])

    def respond(self, request_id: Any, result: Json) -> None:
        self.send({"id": request_id, "result": result})

    def fail(self, request_id: Any, error: RpcError) -> None:
        body: Json = {"code": error.code, "message": error.message}
        if error.data is not None:
            body["data"] = error.data
        self.send({"id": request_id, "error": body})

    def notify(self, method: str, params: Json) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Json) -> int:
        request_id = self._next_id
        self._next_id += 1
        self.send({"id": request_id, "method": method, "params": params})
        return request_id


class Inbox:
    """Reads stdin on a daemon thread; parsed messages (``None`` at EOF) land on a queue.

    It reads raw 64 KiB chunks (not ``readline``), so after :meth:`stop_reading` at most one more
    chunk is taken from the pipe, however long the client's next line is.
    """

    def __init__(self, fd: int, record_path: str | None) -> None:
        self._fd = fd
        self._record_path = record_path
        self._queue: queue.Queue[Json | None] = queue.Queue()
        self._stopped = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="stdin-reader", daemon=True).start()

    def stop_reading(self) -> None:
        """Stop for good: data read from now on is dropped and EOF is never reported."""
        self._stopped.set()

    def get(self, timeout: float | None) -> Json | None:
        """The next message, ``None`` at EOF; raises ``queue.Empty`` on timeout."""
        return self._queue.get(timeout=timeout)

    def _run(self) -> None:
        if self._record_path is None:
            self._pump(None)
            return
        with open(self._record_path, "ab") as record:
            self._pump(record)

    def _pump(self, record: BinaryIO | None) -> None:
        partial: list[bytes] = []  # pieces of the line being read
        while True:
            try:
                data = os.read(self._fd, PIECE)
            except OSError:
                data = b""
            if self._stopped.is_set():
                return
            if not data:
                if partial:
                    self._take(b"".join(partial), record)
                self._queue.put(None)
                return
            *ends, rest = data.split(b"\n")
            for end in ends:
                self._take(b"".join([*partial, end, b"\n"]), record)
                partial = []
            if rest:
                partial.append(rest)

    def _take(self, line: bytes, record: BinaryIO | None) -> None:
        if record is not None:
            record.write(line)
            record.flush()
        message = parse_line(line)
        if message is not None:
            self._queue.put(message)


def parse_line(line: bytes) -> Json | None:
    if not line.strip():
        return None
    try:
        message = json.loads(line)
    except ValueError:
        log(f"ignoring unparseable line: {line[:200]!r}")
        return None
    if not isinstance(message, dict):
        log(f"ignoring non-object message: {line[:200]!r}")
        return None
    return message


# --------------------------------------------------------------------------- turn plan


@dataclass(slots=True)
class TurnPlan:
    """What one prompt turn does; built from ``--script`` defaults plus the prompt's directives."""

    reply: str = "ok"
    sleep: float = 0.0
    unknown_notification: bool = False
    foreign: bool = False
    unknown_update: bool = False
    thought: bool = False
    plan: bool = False
    tool: str | None = None  # final tool_call_update status: "completed" or "failed"
    permission: bool = False
    vendor_request: bool = False
    garbage: bool = False
    long_line: int = 0
    chunks: int = 1
    bulk: int | None = None
    usage: bool = False
    crash: int | None = None
    exit_holding_stdout: bool = False
    stop_reading: bool = False
    never: bool = False
    error: int | None = None
    stop: str = "end_turn"
    ignore_cancel: bool = False


def _flag(value: str | None) -> bool:
    if value is None or value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected no value or one of 1/0/true/false, got {value!r}")


def _required(value: str | None) -> str:
    if not value:
        raise ValueError("needs a value")
    return value


def _seconds(value: str | None) -> float:
    seconds = float(_required(value))
    if not seconds >= 0:  # also rejects NaN
        raise ValueError(f"expected seconds >= 0, got {value!r}")
    return seconds


def _count(value: str | None) -> int:
    count = int(_required(value))
    if count < 0:
        raise ValueError(f"expected a count >= 0, got {value!r}")
    return count


def _code(value: str | None) -> int:
    return int(_required(value))


def _tool(status: str) -> Callable[[str | None], str | None]:
    return lambda value: status if _flag(value) else None


# directive name -> (TurnPlan field, value parser)
DIRECTIVES: dict[str, tuple[str, Callable[[str | None], object]]] = {
    "sleep": ("sleep", _seconds),
    "unknown-notification": ("unknown_notification", _flag),
    "foreign": ("foreign", _flag),
    "unknown-update": ("unknown_update", _flag),
    "thought": ("thought", _flag),
    "plan": ("plan", _flag),
    "tool": ("tool", _tool("completed")),
    "tool-fail": ("tool", _tool("failed")),
    "permission": ("permission", _flag),
    "vendor-request": ("vendor_request", _flag),
    "garbage": ("garbage", _flag),
    "long-line": ("long_line", _count),
    "chunks": ("chunks", _count),
    "bulk": ("bulk", _count),
    "usage": ("usage", _flag),
    "crash": ("crash", _code),
    "exit-holding-stdout": ("exit_holding_stdout", _flag),
    "stop-reading": ("stop_reading", _flag),
    "never": ("never", _flag),
    "error": ("error", _code),
    "stop": ("stop", _required),
    "ignore-cancel": ("ignore_cancel", _flag),
}


@dataclass(frozen=True, slots=True)
class Script:
    """Parsed prompt text (or ``--script``): reply words and ``(name, value)`` directives."""

    words: tuple[str, ...]
    directives: tuple[tuple[str, str | None], ...]

    @classmethod
    def parse(cls, text: str) -> Script:
        words: list[str] = []
        directives: list[tuple[str, str | None]] = []
        for token in text.split():
            if token.startswith("@"):
                name, sep, value = token[1:].partition("=")
                directives.append((name, value if sep else None))
            else:
                words.append(token)
        return cls(tuple(words), tuple(directives))


def build_plan(prompt: Script, defaults: Script) -> TurnPlan:
    """Raises ``ValueError`` for a known directive with a bad value; unknown ones are ignored."""
    plan = TurnPlan(reply=" ".join(prompt.words or defaults.words) or "ok")
    for name, value in (*defaults.directives, *prompt.directives):
        if name not in DIRECTIVES:
            log(f"ignoring unknown directive @{name}")
            continue
        attribute, parse = DIRECTIVES[name]
        try:
            setattr(plan, attribute, parse(value))
        except ValueError as exc:
            raise ValueError(f"bad directive @{name}: {exc}") from None
    return plan


def split_text(text: str, parts: int) -> list[str]:
    """``parts`` contiguous slices of ``text`` (one per character if ``parts`` exceeds its length)."""
    if parts <= 0:
        return []
    count = max(1, min(parts, len(text)))
    size, extra = divmod(len(text), count)
    pieces: list[str] = []
    start = 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def describe_answer(answer: Json) -> tuple[str, str]:
    """``("error", code)`` or ``("result", outcome text)`` for a response to one of our requests."""
    error = answer.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        return "error", str(code)
    result = answer.get("result")
    outcome = result.get("outcome") if isinstance(result, dict) else None
    if isinstance(outcome, dict) and outcome.get("outcome") == "selected":
        return "result", f"selected {outcome.get('optionId')}"
    if isinstance(outcome, dict) and isinstance(outcome.get("outcome"), str):
        return "result", str(outcome["outcome"])
    return "result", "invalid"


# --------------------------------------------------------------------------- agent


@dataclass(frozen=True, slots=True)
class Options:
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


@dataclass
class Session:
    session_id: str
    cwd: str
    history: list[tuple[str, str, str]] = field(default_factory=list)  # (prompt, reply, messageId)


@dataclass(frozen=True, slots=True)
class Wait:
    """What a suspended turn waits for: a deadline, the answer to one of our requests, or neither."""

    deadline: float | None = None
    request_id: int | None = None


Steps: TypeAlias = "Generator[Wait, Json | None, Json]"


@dataclass
class Turn:
    number: int
    request_id: Any
    session: Session
    plan: TurnPlan
    steps: Steps | None = None
    wait: Wait = field(default_factory=Wait)

    @property
    def message_id(self) -> str:
        return f"msg-{self.number}"


class ScriptedAgent:
    """Single-threaded ACP agent: one loop pulls messages from the inbox and resumes turns."""

    def __init__(self, options: Options, wire: Wire, inbox: Inbox) -> None:
        self.options = options
        self.wire = wire
        self.inbox = inbox
        self.sessions: dict[str, Session] = {}
        self.turns: dict[int, Turn] = {}
        self.turn_count = 0
        self.session_count = 0

    # ---- main loop

    def serve(self) -> NoReturn:
        while True:
            try:
                message = self.inbox.get(self._timeout())
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

    def initialize(self, request_id: Any, params: Json) -> Json:
        if self.options.init_error:
            raise RpcError(*self.options.init_error)
        capabilities: Json = {
            "loadSession": "load" in self.options.advertise,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
            "mcpCapabilities": {"http": False, "sse": False},
        }
        extras = [name for name in ADVERTISABLE[1:] if name in self.options.advertise]
        if extras:
            capabilities["sessionCapabilities"] = {name: {} for name in extras}
        result: Json = {
            "protocolVersion": self.options.protocol_version,
            "agentCapabilities": capabilities,
            "authMethods": [],
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
            raise RpcError(*self.options.new_error)
        cwd = self._check_cwd(params)
        self.session_count += 1
        if self.options.state_dir:  # ids stay unique across the processes sharing the directory
            self.session_count = max(self.session_count, len(os.listdir(self.options.state_dir)) + 1)
        session_id = self.options.session_id or "sess"
        if self.session_count > 1 or not self.options.session_id:
            session_id = f"{session_id}-{self.session_count}"
        self.sessions[session_id] = Session(session_id, cwd)
        self._save(self.sessions[session_id])
        return {"sessionId": session_id}

    def load_session(self, request_id: Any, params: Json) -> Json | None:
        self._require_capability("load", "session/load")
        if self.options.load_error:
            raise RpcError(*self.options.load_error)
        self._check_cwd(params)
        session = self._session(params)
        if self.options.load_replay == "after":
            self.wire.respond(request_id, {})
        if self.options.load_replay != "none":
            for prompt, reply, message_id in session.history:
                self._update(session.session_id, "user_message_chunk", content=_text(prompt))
                if reply:
                    self._say(session.session_id, reply, message_id)
        return None if self.options.load_replay == "after" else {}

    def resume_session(self, request_id: Any, params: Json) -> Json:
        self._require_capability("resume", "session/resume")
        if self.options.resume_error:
            raise RpcError(*self.options.resume_error)
        self._session(params)
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

    def _session(self, params: Json) -> Session:
        session_id = str(params.get("sessionId"))
        session = self.sessions.get(session_id) or self._restore(session_id)
        if session is None:
            raise RpcError(-32002, "session not found", {"sessionId": params.get("sessionId")})
        return session

    def _state_file(self, session_id: str) -> str | None:
        if not self.options.state_dir or "/" in session_id or session_id.startswith("."):
            return None
        return os.path.join(self.options.state_dir, f"{session_id}.json")

    def _save(self, session: Session) -> None:
        path = self._state_file(session.session_id)
        if path is not None:
            history = [list(entry) for entry in session.history]
            write_text(path, json.dumps({"cwd": session.cwd, "history": history}))

    def _restore(self, session_id: str) -> Session | None:
        path = self._state_file(session_id)
        if path is None or not os.path.exists(path):
            return None
        with open(path) as f:
            saved = json.load(f)
        session = Session(session_id, saved["cwd"], [tuple(entry) for entry in saved["history"]])
        self.sessions[session_id] = session
        return session

    def _require_capability(self, capability: str, method: str) -> None:
        if capability not in self.options.advertise:
            raise RpcError(-32601, "Method not found", {"method": method})

    # ---- the turn itself

    def _run_turn(self, turn: Turn, prompt_text: str) -> Steps:
        plan, sid = turn.plan, turn.session.session_id
        if plan.sleep > 0:
            yield from _sleep(plan.sleep)
        self._side_updates(plan, sid)
        if plan.permission:
            answer = yield from self._ask(_permission_params(sid))
            outcome = describe_answer(answer)[1]
            self._say(sid, f"permission outcome: {outcome}", f"{turn.message_id}-permission")
        if plan.vendor_request:
            answer = yield from self._ask({}, method="craft/drainMidTurnQueue")
            kind, code = describe_answer(answer)
            said = f"error {code}" if kind == "error" else "result"
            self._say(sid, f"vendor request answered: {said}", f"{turn.message_id}-vendor")
        if plan.garbage:
            self.wire.write([b"this is not json\n"])
        if plan.long_line:
            self.wire.write(_long_line(plan.long_line))
        reply = self._reply(turn)
        turn.session.history.append((prompt_text, reply, turn.message_id))
        self._save(turn.session)
        if plan.usage:
            self._update(sid, "usage_update", used=10, size=100)
        self._exits(plan)
        if plan.stop_reading:
            self.wire.request("session/request_permission", _huge_permission_params(sid))
            self.inbox.stop_reading()
            yield from _forever()
        if plan.never:
            yield from _forever()
        if plan.error is not None:
            raise RpcError(plan.error, SCRIPTED_FAILURE)
        return {"stopReason": plan.stop}

    def _side_updates(self, plan: TurnPlan, sid: str) -> None:
        if plan.unknown_notification:
            self.wire.notify("vendor/notify", {"x": 1})
        if plan.foreign:
            self._say("other-session", "foreign text", "msg-foreign")
        if plan.unknown_update:
            self._update(sid, "mystery_update", mystery=True)
        if plan.thought:
            self._update(sid, "agent_thought_chunk", content=_text("thinking"))
        if plan.plan:
            self._update(sid, "plan", entries=PLAN_ENTRIES)
        if plan.tool is not None:
            title = "Read README.md" if plan.tool == "completed" else "Read failed"
            self._update(sid, "tool_call", toolCallId="call-1", title="Read file", kind="read", status="pending")
            self._update(sid, "tool_call_update", toolCallId="call-1", status=plan.tool, title=title)

    def _reply(self, turn: Turn) -> str:
        sid, plan = turn.session.session_id, turn.plan
        if plan.bulk is None:
            pieces = split_text(plan.reply, plan.chunks)
            for piece in pieces:
                self._say(sid, piece, turn.message_id)
            return "".join(pieces)
        line = encode(_chunk_message(sid, "x", turn.message_id))
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
        self.wire.send(_chunk_message(sid, text, message_id))


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

PLAN_ENTRIES = [
    {"content": "Read the code", "priority": "high", "status": "pending"},
    {"content": "Write the fix", "priority": "low", "status": "in_progress"},
]


def _text(text: str) -> Json:
    return {"type": "text", "text": text}


def _chunk_message(sid: str, text: str, message_id: str) -> Json:
    update = {"sessionUpdate": "agent_message_chunk", "messageId": message_id, "content": _text(text)}
    return {"method": "session/update", "params": {"sessionId": sid, "update": update}}


def _permission_params(sid: str) -> Json:
    return {
        "sessionId": sid,
        "toolCall": {"toolCallId": "call-2", "title": "Write file", "kind": "edit"},
        "options": [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
            {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
    }


def _huge_permission_params(sid: str) -> Json:
    return {
        "sessionId": sid,
        "toolCall": {"toolCallId": "call-3", "title": "Huge request", "kind": "other"},
        "options": [{"optionId": "r" * HUGE_OPTION_ID_CHARS, "name": "Reject", "kind": "reject_once"}],
    }


def _long_line(size: int) -> Iterable[bytes]:
    """``size`` bytes (a JSON string of ``a`` when size >= 2) plus ``\\n``, in 64 KiB pieces."""
    quoted = size >= 2
    body = size - 2 if quoted else size
    piece = b"a" * PIECE
    if quoted:
        yield b'"'
    full, rest = divmod(body, PIECE)
    for _ in range(full):
        yield piece
    yield piece[:rest]
    yield b'"\n' if quoted else b"\n"


def _sleep(seconds: float) -> Generator[Wait, Json | None, None]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        yield Wait(deadline=deadline)


def _forever() -> Generator[Wait, Json | None, NoReturn]:
    while True:
        yield Wait()


# --------------------------------------------------------------------------- command line


def _error_spec(text: str) -> tuple[int, str]:
    code_text, sep, message = text.partition(":")
    code = int(code_text)
    if not sep:
        message = AUTH_MESSAGE if code == AUTH_REQUIRED else SCRIPTED_FAILURE
    return code, message


def _advertised(text: str) -> frozenset[str]:
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    unknown = names - set(ADVERTISABLE)
    if unknown:
        raise ValueError(f"unknown capabilities: {', '.join(sorted(unknown))}")
    return names


def _parser() -> argparse.ArgumentParser:
    import argparse

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
    )
    return options, args


def start_up(args: argparse.Namespace) -> None:
    """The start-level side effects, in order: signals, files, stderr, child."""
    if args.ignore_sigterm:
        import signal

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


def main(argv: Sequence[str] | None = None) -> NoReturn:
    options, args = parse_options(argv)
    try:
        start_up(args)
        inbox = Inbox(0, args.record)  # fd 0, read raw (works even if sys.stdin is None)
        inbox.start()
        ScriptedAgent(options, Wire(sys.stdout.buffer), inbox).serve()
    except KeyboardInterrupt:
        hard_exit(130)
    except BrokenPipeError:
        hard_exit(0)


if __name__ == "__main__":
    main()

"""A scriptable mock of the OpenAI chat-completions API, for driving qwen-code in tests.

Standard library only: ``http.server.ThreadingHTTPServer`` on ``127.0.0.1`` (port 0), served from a
daemon thread.  Use it as a context manager::

    with OpenAIMock(default_text="pong") as mock:
        mock.enqueue(write_file_call("/abs/ws/out.txt", "hello\\n"))
        env = qwen_env(home, mock)          # OPENAI_BASE_URL=mock.base_url, ...
        ...
        assert mock.turn_requests()[0].stream

Endpoints: ``GET /v1/models`` (and ``/v1/models/<id>``) and ``POST /v1/chat/completions``, both
plain (``chat.completion`` JSON) and ``stream: true`` (SSE ``data: {chat.completion.chunk}`` lines,
then ``data: [DONE]``).  Every response carries ``usage``.

qwen-code 0.24.4 sends three kinds of chat requests, and the mock classifies each one
(:attr:`RecordedRequest.kind`):

``"turn"``
    The main agent loop of a ``session/prompt``: system prompt "You are Qwen Code...", the full tool
    list, ``stream: true``.  One ACP turn makes one such request per model step (a tool call, then
    another request carrying the tool result, ...).  Only these consume the scripted queue.
``"json"``
    ``BaseLlmClient.generateJson`` side queries (session title, AUTO-mode permission classifier,
    next-speaker check, ...): not streamed, a single tool ``respond_in_schema`` and
    ``tool_choice: "required"``.  The default answer calls ``respond_in_schema`` with the smallest
    value that satisfies the schema (booleans ``false``, so the AUTO classifier never blocks; enums
    take their first member, so next-speaker says ``"user"``).
``"background"``
    Everything else: the managed-memory extraction subagent that runs after each turn (it has its own
    system prompt and tools such as ``write_file``; a plain text answer ends it without touching
    files), forked "follow-up suggestion" queries (answered with ``{"suggestion": ""}``, which qwen
    drops), and other text side queries.  Answered with :attr:`OpenAIMock.background_text`.

How a request is answered: first ``responder(request)`` if one is set and it returns a reply (it sees
every kind), then for ``"turn"`` requests the next queued reply, then the defaults above.

The replies, the recorded requests and their classification are in :mod:`tests.support.openai_replies`
(importable from here too).
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Self

from tests.support.openai_replies import (
    JSON_TOOL_NAME,
    SUGGESTION_MARKER,
    ErrorReply,
    JsonObject,
    RecordedRequest,
    Reply,
    RequestKind,
    Responder,
    TextReply,
    ToolCall,
    ToolCallReply,
    classify,
    schema_instance,
    write_file_call,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from types import TracebackType

__all__ = [
    "ErrorReply",
    "OpenAIMock",
    "RecordedRequest",
    "Reply",
    "RequestKind",
    "Responder",
    "TextReply",
    "ToolCall",
    "ToolCallReply",
    "schema_instance",
    "write_file_call",
]


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mock: OpenAIMock) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mock = mock

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-response (qwen aborting a cancelled request) is not an error.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _ClientGone(Exception):
    """The HTTP client closed the connection (e.g. qwen aborted a cancelled request)."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection; SSE bodies end when the socket closes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        mock = self.server.mock
        try:
            body = self._read_json() if method == "POST" else None
            if method == "POST" and body is None:
                self._send_json(400, _error_body("request body is not a JSON object", "invalid_request_error"))
                return
            request = mock._record(method, self.path, body)
            if request.kind == "models":
                self._answer_models(request)
            elif request.kind == "other":
                self._send_json(404, _error_body(f"no route for {method} {self.path}", "not_found_error"))
            else:
                self._answer_chat(request, mock._choose_reply(request))
        except (_ClientGone, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _read_json(self) -> JsonObject | None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self._read_chunked()
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            decoded = json.loads(raw)
        except ValueError:
            return None
        return decoded if isinstance(decoded, dict) else None

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline().strip():
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _answer_models(self, request: RecordedRequest) -> None:
        models = [{"id": m, "object": "model", "created": 0, "owned_by": "mock"} for m in self.server.mock.models]
        route = request.path.split("?", 1)[0].rstrip("/")
        if route.endswith("/models"):
            self._send_json(200, {"object": "list", "data": models})
            return
        wanted = route.rsplit("/", 1)[-1]
        found = [m for m in models if m["id"] == wanted]
        if found:
            self._send_json(200, found[0])
        else:
            self._send_json(404, _error_body(f"model {wanted!r} not found", "not_found_error"))

    def _answer_chat(self, request: RecordedRequest, reply: Reply) -> None:
        if isinstance(reply, ErrorReply):
            self._send_json(reply.status, _error_body(reply.message, reply.error_type))
            return
        body = request.body or {}
        model = body.get("model") if isinstance(body.get("model"), str) else self.server.mock.models[0]
        completion_id = f"chatcmpl-mock-{self.server.mock._next_id()}"
        created = int(time.time())
        prompt_tokens = _estimate_tokens(json.dumps(body.get("messages", [])))
        calls = [
            {
                "id": call.call_id or f"call_{self.server.mock._next_id()}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
            }
            for call in (reply.calls if isinstance(reply, ToolCallReply) else ())
        ]
        text = reply.text
        completion_tokens = _estimate_tokens(text + json.dumps(calls)) if text or calls else 0
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        finish_reason = "tool_calls" if calls else reply.finish_reason if isinstance(reply, TextReply) else "stop"
        if not request.stream:
            message: JsonObject = {"role": "assistant", "content": text if text or not calls else None}
            if calls:
                message["tool_calls"] = calls
            self._send_json(
                200,
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
                    "usage": usage,
                },
            )
            return

        def chunk(choices: list[JsonObject], **extra: Any) -> JsonObject:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": choices,
                **extra,
            }

        def delta(payload: JsonObject, finish: str | None = None) -> JsonObject:
            return chunk([{"index": 0, "delta": payload, "finish_reason": finish, "logprobs": None}])

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self._send_event(delta({"role": "assistant", "content": ""}))
        size = reply.chunk_size if isinstance(reply, TextReply) and reply.chunk_size > 0 else 32
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        for index, piece in enumerate(pieces):
            if index > 0 and isinstance(reply, TextReply):
                if reply.chunk_delay > 0:
                    time.sleep(reply.chunk_delay)
                if index == 1 and reply.hold is not None:
                    self.server.mock._wait_for_release(reply.hold)
            self._send_event(delta({"content": piece}))
        if isinstance(reply, TextReply) and reply.hold is not None and len(pieces) <= 1:
            self.server.mock._wait_for_release(reply.hold)
        for index, call in enumerate(calls):
            self._send_event(delta({"tool_calls": [{"index": index, **call}]}))
        include_usage = isinstance(body.get("stream_options"), dict) and body["stream_options"].get("include_usage")
        if include_usage:
            self._send_event(delta({}, finish_reason))
            self._send_event(chunk([], usage=usage))
        else:
            final = delta({}, finish_reason)
            final["usage"] = usage
            self._send_event(final)
        self._send_raw(b"data: [DONE]\n\n")

    def _send_event(self, payload: JsonObject) -> None:
        self._send_raw(b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n")

    def _send_raw(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as exc:
            raise _ClientGone from exc

    def _send_json(self, status: int, payload: JsonObject) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self._send_raw(data)


def _error_body(message: str, error_type: str) -> JsonObject:
    return {"error": {"message": message, "type": error_type, "param": None, "code": None}}


class OpenAIMock:
    """The mock server.  Start it with ``with`` (or :meth:`start`/:meth:`close`).

    :param default_text: the answer to ``"turn"`` requests when the queue is empty.
    :param background_text: the answer to ``"background"`` requests.
    :param responder: optional callable consulted first for every chat request; return ``None`` to
        fall through to the queue and the defaults.
    :param models: model ids listed by ``GET /v1/models``; the first is :attr:`model`.
    """

    def __init__(
        self,
        *,
        default_text: str = "Hello from the mock model.",
        background_text: str = "Nothing to do.",
        responder: Responder | None = None,
        models: Iterable[str] = ("mock-model",),
    ) -> None:
        self.default_text = default_text
        self.background_text = background_text
        self.responder = responder
        self.models = list(models) or ["mock-model"]
        self._queue: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._condition = threading.Condition()
        self._ids = itertools.count(1)
        self._closed = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> Self:
        if self._server is not None:
            raise RuntimeError("OpenAIMock already started")
        self._closed.clear()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-mock", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, release any held replies, close the socket and join the thread."""
        self._closed.set()
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- configuration ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("OpenAIMock is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the value for ``OPENAI_BASE_URL``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        """The model id for ``OPENAI_MODEL``."""
        return self.models[0]

    def enqueue(self, *replies: Reply | str) -> None:
        """Queue answers for the next ``"turn"`` requests, in order (a ``str`` is a :class:`TextReply`)."""
        with self._condition:
            self._queue.extend(TextReply(r) if isinstance(r, str) else r for r in replies)

    def pending_replies(self) -> int:
        with self._condition:
            return len(self._queue)

    # -- inspection ------------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._condition:
            return list(self._requests)

    def turn_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.kind == "turn"]

    def clear_requests(self) -> None:
        with self._condition:
            self._requests.clear()

    def wait_for(self, predicate: Callable[[RecordedRequest], bool], timeout: float = 10.0) -> RecordedRequest:
        """Block until a request matching ``predicate`` has been received; return the first match."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                for request in self._requests:
                    if predicate(request):
                        return request
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no matching request within {timeout} s")
                self._condition.wait(remaining)

    def iter_requests(self, kind: RequestKind | None = None) -> Iterator[RecordedRequest]:
        return iter([r for r in self.requests if kind is None or r.kind == kind])

    # -- called from handler threads -------------------------------------------------------------

    def _record(self, method: str, path: str, body: JsonObject | None) -> RecordedRequest:
        request = RecordedRequest(method, path, body, classify(method, path, body))
        with self._condition:
            self._requests.append(request)
            self._condition.notify_all()
        return request

    def _choose_reply(self, request: RecordedRequest) -> Reply:
        if self.responder is not None:
            chosen = self.responder(request)
            if chosen is not None:
                return chosen
        if request.kind == "turn":
            with self._condition:
                if self._queue:
                    return self._queue.popleft()
            return TextReply(self.default_text)
        if request.kind == "json":
            return ToolCallReply.single(JSON_TOOL_NAME, schema_instance(request.json_schema() or {}))
        if SUGGESTION_MARKER in request.last_user_text:
            return TextReply(json.dumps({"suggestion": ""}))
        return TextReply(self.background_text)

    def _next_id(self) -> int:
        with self._condition:
            return next(self._ids)

    def _wait_for_release(self, hold: threading.Event) -> None:
        while not hold.is_set() and not self._closed.is_set():
            hold.wait(0.05)

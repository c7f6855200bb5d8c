"""A mock of the Gemini API with chosen ``usageMetadata``, for driving gemini-cli offline in tests.

Standard library only: ``http.server.ThreadingHTTPServer`` on ``127.0.0.1`` (port 0), served from a
daemon thread. Point gemini-cli at it with ``GOOGLE_GEMINI_BASE_URL=mock.base_url`` (see
``tests/support/gemini.py``)::

    with GeminiMock() as mock:
        mock.usage.append(Usage(prompt=1234, candidates=56, cached=200, thoughts=7, tool=9, total=1506))
        ...
        assert mock.calls()[-1].role == "main"

gemini-cli 0.61.0 makes two calls per turn under its default ``auto`` model routing (see
``../shared/reference/gemini-offline.md`` §1.2), and the mock tells them apart by their shape:

``"utility_router"``
    ``POST /v1beta/models/<lite>:generateContent`` asking for JSON by ``responseJsonSchema``: the
    routing classifier. Answered with a schema instance (``complexity_score`` 10, so it routes to
    flash) and :attr:`GeminiMock.router_usage`; a reply that does not fit the schema would make the
    CLI fall back to another model.
``"main"``
    ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``: the turn itself. Answered with one
    SSE chunk carrying :attr:`GeminiMock.text` and the next :class:`Usage` of :attr:`GeminiMock.usage`
    (a queue; :attr:`GeminiMock.default_usage` once it is empty).

A main call whose last user text contains :attr:`GeminiMock.hold_word` is held until
:meth:`GeminiMock.release` (or the client goes away), for a turn cancelled mid-call; it is answered
with :attr:`GeminiMock.default_usage`, leaving the queue to the calls that follow. ``countTokens``
is answered from the text length; nothing else is called offline.
"""

from __future__ import annotations

import json
import select
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Literal, Self

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["Call", "GeminiMock", "Usage"]

Json = dict[str, Any]
Role = Literal["main", "utility_router", "other"]


@dataclass(frozen=True, slots=True)
class Usage:
    """One response's ``usageMetadata``; gemini-cli copies each field into its telemetry record."""

    prompt: int
    candidates: int
    cached: int = 0
    thoughts: int = 0
    tool: int = 0
    total: int | None = None
    """``totalTokenCount``; the API's own sum when not given (gemini-cli passes it through)."""

    def metadata(self) -> Json:
        total = self.total if self.total is not None else self.prompt + self.candidates + self.thoughts + self.tool
        return {
            "promptTokenCount": self.prompt,
            "candidatesTokenCount": self.candidates,
            "cachedContentTokenCount": self.cached,
            "thoughtsTokenCount": self.thoughts,
            "toolUsePromptTokenCount": self.tool,
            "totalTokenCount": total,
        }


@dataclass(frozen=True, slots=True)
class Call:
    """One request the mock answered."""

    path: str
    model: str
    role: Role
    body: Json = field(repr=False)
    usage: Usage | None = None

    @property
    def last_user_text(self) -> str:
        for content in reversed(self.body.get("contents") or []):
            if isinstance(content, dict) and content.get("role") == "user":
                parts = content.get("parts") or []
                return " ".join(p.get("text", "") for p in parts if isinstance(p, dict))
        return ""


class GeminiMock:
    """The mock server; a context manager (started on enter, stopped on exit)."""

    def __init__(self, *, text: str = "Hello from the mock Gemini.", hold_word: str = "@hold") -> None:
        self.text = text
        self.hold_word = hold_word
        self.usage: deque[Usage] = deque()
        self.default_usage = Usage(prompt=100, candidates=10)
        self.router_usage = Usage(prompt=30, candidates=5)
        self._calls: list[Call] = []
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the mock is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def calls(self, role: Role | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if role is None or c.role == role]

    def release(self) -> None:
        """Let held main calls answer (and every later one answer at once)."""
        self._released.set()

    def start(self) -> Self:
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, name="gemini-mock", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- answering (from the server's threads)

    def _record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)

    def _next_usage(self) -> Usage:
        with self._lock:
            return self.usage.popleft() if self.usage else self.default_usage


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mock: GeminiMock) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mock = mock

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-answer (a cancelled turn) is not an error here


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        path = self.path.split("?", 1)[0]
        model, _, action = path.rsplit("/", 1)[-1].partition(":")
        mock = self.server.mock
        if action == "countTokens":
            self._send_json({"totalTokens": max(1, len(json.dumps(body)) // 4)})
        elif action == "generateContent" and _json_schema(body) is not None:
            mock._record(Call(path, model, "utility_router", body, mock.router_usage))
            answer = json.dumps({"complexity_reasoning": "a short greeting", "complexity_score": 10})
            self._send_json(_response(answer, mock.router_usage, model))
        elif action in ("streamGenerateContent", "generateContent"):
            call = Call(path, model, "main", body)
            if mock.hold_word and mock.hold_word in call.last_user_text:
                mock._record(call)
                while not mock._released.wait(0.2):
                    if self._client_gone():
                        return
                usage = mock.default_usage  # a held call never takes a queued usage
            else:
                usage = mock._next_usage()
                mock._record(Call(path, model, "main", body, usage))
            payload = _response(mock.text, usage, model)
            if action == "generateContent":
                self._send_json(payload)
            else:
                self._send_sse(payload)
        else:
            mock._record(Call(path, model, "other", body))
            self._send_json({"error": {"code": 404, "message": f"not mocked: {path}", "status": "NOT_FOUND"}}, 404)

    def _client_gone(self) -> bool:

        readable, _, _ = select.select([self.connection], [], [], 0)
        return bool(readable) and not self.connection.recv(1, 2)  # MSG_PEEK: EOF means gone

    def _send_json(self, payload: Json, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_sse(self, payload: Json) -> None:
        data = f"data: {json.dumps(payload)}\r\n\r\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _json_schema(body: Json) -> Any:
    config = body.get("generationConfig")
    return config.get("responseJsonSchema") if isinstance(config, dict) else None


def _response(text: str, usage: Usage, model: str) -> Json:
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage.metadata(),
        "modelVersion": model,
    }

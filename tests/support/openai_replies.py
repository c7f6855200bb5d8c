"""What the OpenAI mock (:mod:`tests.support.openai_mock`) is asked and answers: the replies a
test queues (:class:`TextReply`, :class:`ToolCallReply`, :class:`ErrorReply`), the requests it
records (:class:`RecordedRequest`), which kind each one is (:func:`classify`: qwen-code's main
loop, its JSON side queries, or background work), and the default answer to a JSON side query
(:func:`schema_instance`). No I/O here: the server is in :mod:`tests.support.openai_mock`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    import threading

__all__ = [
    "JSON_TOOL_NAME",
    "MAIN_SYSTEM_PROMPT_PREFIX",
    "SUGGESTION_MARKER",
    "ErrorReply",
    "JsonObject",
    "RecordedRequest",
    "Reply",
    "RequestKind",
    "Responder",
    "TextReply",
    "ToolCall",
    "ToolCallReply",
    "classify",
    "schema_instance",
    "write_file_call",
]

JsonObject: TypeAlias = dict[str, Any]
RequestKind: TypeAlias = Literal["turn", "json", "background", "models", "other"]

#: How qwen-code 0.24.4's main-loop system prompt starts (ACP mode, any approval mode).
MAIN_SYSTEM_PROMPT_PREFIX = "You are Qwen Code"
#: The tool that ``BaseLlmClient.generateJson`` forces the model to call.
JSON_TOOL_NAME = "respond_in_schema"
#: Marker in the user message of the forked follow-up-suggestion queries.
SUGGESTION_MARKER = "[SUGGESTION MODE"


@dataclass(frozen=True)
class TextReply:
    """Answer with assistant text.

    Streamed as ``chunk_size``-character deltas with ``chunk_delay`` seconds between them.  If ``hold``
    is given, the stream stops after the first delta until the event is set (or the mock is closed),
    which keeps a turn in flight, e.g. to test ``session/cancel``.  ``finish_reason="length"`` makes
    the model look truncated.
    """

    text: str
    chunk_size: int = 32
    chunk_delay: float = 0.0
    hold: threading.Event | None = None
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ToolCall:
    """One function call; ``call_id`` defaults to a fresh ``call_<n>``."""

    name: str
    arguments: Mapping[str, Any]
    call_id: str | None = None


@dataclass(frozen=True)
class ToolCallReply:
    """Answer with one or more tool calls, optionally preceded by some text."""

    calls: tuple[ToolCall, ...]
    text: str = ""

    @classmethod
    def single(cls, name: str, arguments: Mapping[str, Any], *, text: str = "") -> ToolCallReply:
        return cls(calls=(ToolCall(name, arguments),), text=text)


@dataclass(frozen=True)
class ErrorReply:
    """Answer with an HTTP error and an OpenAI-style error body.

    qwen retries 429 and 5xx with backoff (slow); a 400 fails the turn at once.
    """

    status: int = 400
    message: str = "mock error"
    error_type: str = "invalid_request_error"


Reply: TypeAlias = TextReply | ToolCallReply | ErrorReply


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the mock received, with its decoded JSON body (``None`` for a GET)."""

    method: str
    path: str
    body: JsonObject | None
    kind: RequestKind
    received_at: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[JsonObject]:
        if self.body is None:
            return []
        messages = self.body.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def stream(self) -> bool:
        return self.body is not None and self.body.get("stream") is True

    @property
    def tool_names(self) -> list[str]:
        if self.body is None or not isinstance(self.body.get("tools"), list):
            return []
        names: list[str] = []
        for tool in self.body["tools"]:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.append(function["name"])
        return names

    @property
    def system_prompt(self) -> str:
        return "\n".join(_text_of(m.get("content")) for m in self.messages if m.get("role") == "system")

    @property
    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _text_of(message.get("content"))
        return ""

    @property
    def tool_results(self) -> list[JsonObject]:
        """The ``role: "tool"`` messages (results of earlier tool calls) in this request."""
        return [m for m in self.messages if m.get("role") == "tool"]

    def json_schema(self) -> JsonObject | None:
        """The schema of the ``respond_in_schema`` tool, for ``"json"`` requests."""
        if self.body is None or not isinstance(self.body.get("tools"), list):
            return None
        for tool in self.body["tools"]:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and function.get("name") == JSON_TOOL_NAME:
                parameters = function.get("parameters")
                return parameters if isinstance(parameters, dict) else {}
        return None


Responder: TypeAlias = Callable[[RecordedRequest], Reply | None]


def write_file_call(file_path: str, content: str, *, text: str = "") -> ToolCallReply:
    """A call of qwen-code's ``write_file`` tool (arguments ``file_path`` (absolute) and ``content``)."""
    return ToolCallReply.single("write_file", {"file_path": file_path, "content": content}, text=text)


def classify(method: str, path: str, body: JsonObject | None) -> RequestKind:
    """Tell the main agent loop from qwen's side and background calls (see
    :mod:`tests.support.openai_mock`)."""
    route = path.split("?", 1)[0].rstrip("/")
    if method == "GET" and (route.endswith("/models") or "/models/" in route):
        return "models"
    if method != "POST" or not route.endswith("/chat/completions") or body is None:
        return "other"
    request = RecordedRequest(method, path, body, "other")
    tools = request.tool_names
    if JSON_TOOL_NAME in tools:
        return "json"
    if (
        tools
        and request.system_prompt.startswith(MAIN_SYSTEM_PROMPT_PREFIX)
        and SUGGESTION_MARKER not in request.last_user_text
    ):
        return "turn"
    return "background"


def schema_instance(schema: Mapping[str, Any], name: str = "value") -> Any:
    """The smallest JSON value that satisfies a (simple) JSON schema.

    Handles ``const``, ``enum`` (first member), ``anyOf``/``oneOf`` (first branch), ``type`` lists,
    objects (required properties only), arrays (``minItems``), strings (``minLength``; otherwise
    ``"mock <name>"``), numbers (``minimum``) and booleans (``false``).
    """
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches and isinstance(branches[0], Mapping):
            return schema_instance(branches[0], name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        return {
            key: schema_instance(sub if isinstance(sub, Mapping) else {}, key)
            for key, sub in properties.items()
            if isinstance(required, list) and key in required
        }
    if kind == "array":
        items = schema.get("items")
        count = schema.get("minItems", 0)
        item_schema = items if isinstance(items, Mapping) else {}
        return [schema_instance(item_schema, name) for _ in range(count if isinstance(count, int) else 0)]
    if kind == "string":
        text = f"mock {name}"
        min_length = schema.get("minLength")
        max_length = schema.get("maxLength")
        if isinstance(min_length, int) and len(text) < min_length:
            text = text.ljust(min_length, "x")
        if isinstance(max_length, int):
            text = text[:max_length]
        return text
    if kind in ("integer", "number"):
        minimum = schema.get("minimum", schema.get("exclusiveMinimum"))
        if isinstance(minimum, int | float) and not isinstance(minimum, bool):
            return int(minimum) + (1 if "exclusiveMinimum" in schema and "minimum" not in schema else 0)
        return 0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""

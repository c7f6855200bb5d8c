"""A JSON-RPC 2.0 peer without I/O.

Theory of operation: :meth:`JsonRpcPeer.receive` classifies one framed line into a
:class:`Request`, :class:`RpcNotification`, :class:`Response` or :class:`MalformedLine`, parsing it
exactly once. The caller dispatches on the result's type; nothing here validates method
parameters, so the hot path (``session/update``) costs one ``json.loads`` and a few lookups.

Requests flow both ways. Our ids are integers we allocate; the agent's ids are echoed back
verbatim, whatever their type (agents start at ``0``, some use strings). Requests in each
direction are tracked separately, so an agent id ``1`` never collides with ours. A response
that answers nothing we asked is returned as :class:`StrayResponse` for the caller to log.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "MAX_NESTING",
    "METHOD_NOT_FOUND",
    "JsonRpcPeer",
    "MalformedLine",
    "Request",
    "RequestId",
    "Response",
    "RpcErrorBody",
    "RpcNotification",
    "StrayResponse",
    "encode",
    "nesting_exceeds",
]

METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

RequestId = int | str
JsonObject = dict[str, Any]

# ASCII output: an agent id or text with a lone surrogate still encodes, and nothing multi-byte
# can be split by a short write.
_dumps = json.JSONEncoder(separators=(",", ":")).encode
# The decoder's C scanner: (text, index) -> (value, end). Typeshed does not declare the attribute.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_SPACE = " \t\n\r"


def _loads(line: bytes) -> Any:
    """``json.loads`` for one UTF-8 line, without its encoding sniffing and two regex passes
    (a third of the hot path's parse). Raises ``ValueError`` as it does."""
    text = line.decode("utf-8")
    if text.startswith("\ufeff"):  # json.loads accepts UTF-8 bytes behind a byte-order mark
        text = text[1:]
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return json.loads(text)  # leading whitespace or not JSON: the standard path says which
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        raise ValueError(f"extra data after the JSON value at character {end}")
    return value


def encode(message: JsonObject) -> bytes:
    """Encode one message as a compact JSON line (JSON escapes keep it free of newlines)."""
    return (_dumps(message) + "\n").encode("ascii")


@dataclass(slots=True, frozen=True)
class RpcErrorBody:
    code: int
    message: str
    data: Any = None


@dataclass(slots=True)
class Request:
    """A request from the agent; ``id`` must be echoed verbatim in the answer."""

    id: RequestId
    method: str
    params: Any


@dataclass(slots=True)
class RpcNotification:
    """A notification from the agent: a method and its parameters, never answered."""

    method: str
    params: Any


@dataclass(slots=True)
class Response:
    """The answer to one of our requests; exactly one of ``result`` and ``error`` is meaningful."""

    id: RequestId
    method: str
    result: Any = None
    error: RpcErrorBody | None = None


@dataclass(slots=True)
class StrayResponse:
    """A response to no pending request of ours (logged and ignored by the caller)."""

    id: Any


@dataclass(slots=True)
class MalformedLine:
    """A line that is not a JSON-RPC 2.0 message; ``excerpt`` is a bounded prefix of it.

    ``reply_to`` is the id of a request of ours that the line appears to answer (it names that
    id and could not be read), so the caller can tell a lost answer from noise.
    """

    reason: str
    excerpt: str = field(default="")
    reply_to: RequestId | None = None
    cut: bool = False
    """The excerpt is a prefix of a longer line."""


Incoming = Request | RpcNotification | Response | StrayResponse | MalformedLine

_EXCERPT = 200
MAX_NESTING: Final = 64
"""Deepest nesting of arrays and objects accepted in a line. ACP messages nest a handful of levels;
the bound sits far below what the parser, the logging and the JSON encoder can take, so a hostile
line is refused here, once, instead of raising ``RecursionError`` somewhere deeper."""

_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS_ONLY = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_ID = re.compile(rb'"id"\s*:\s*(\d{1,18})\b')


def nesting_exceeds(line: bytes, limit: int = MAX_NESTING) -> bool:
    """Whether ``line`` nests arrays and objects deeper than ``limit`` (brackets inside strings
    do not count). Cheap for ordinary lines: only a line with more than ``limit`` brackets is
    looked at closely, by stripping innermost pairs level by level (at most ``limit`` passes,
    each one C-speed work on a string that only shrinks)."""
    if line.count(b"[") + line.count(b"{") <= limit:
        return False
    shape = _STRINGS.sub(b"", line).translate(_BRACKETS_ONLY, _NOT_BRACKETS)
    run = b"[" * (limit + 1)
    for _ in range(limit):
        if run in shape:
            return True
        stripped = shape.replace(b"[]", b"")
        if len(stripped) == len(shape):
            return False  # nothing nests any further (the line is not valid JSON anyway)
        shape = stripped
        if not shape:
            return False
    return bool(shape)


def _excerpt(line: bytes) -> str:
    return line[:_EXCERPT].decode("utf-8", "replace")


def _valid_id(value: Any) -> bool:
    # bool is an int subclass; JSON true/false are not valid ids.
    return (type(value) is int) or isinstance(value, str)


class JsonRpcPeer:
    """Bookkeeping for one JSON-RPC connection: id allocation and pending requests both ways."""

    __slots__ = ("_incoming", "_next_id", "_outgoing")

    def __init__(self, first_id: int = 1) -> None:
        self._next_id = first_id
        self._outgoing: dict[RequestId, str] = {}
        self._incoming: dict[RequestId, str] = {}

    # -- what we send -------------------------------------------------------------------------

    def request(self, method: str, params: JsonObject | None = None) -> tuple[int, bytes]:
        """Allocate an id for a request of ours; return it with the encoded line."""
        request_id = self._next_id
        self._next_id += 1
        self._outgoing[request_id] = method
        message: JsonObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return request_id, encode(message)

    def adopt(self, request_id: RequestId, method: str) -> None:
        """Await the answer to a request another client sent on this stream (one this client
        took over mid-request); its ids must not meet ours (see ``first_id``)."""
        self._outgoing[request_id] = method

    def forget(self, request_id: RequestId) -> None:
        """Stop waiting for an answer (the request timed out or was abandoned)."""
        self._outgoing.pop(request_id, None)

    def notify(self, method: str, params: JsonObject | None = None) -> bytes:
        message: JsonObject = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return encode(message)

    def respond(self, request_id: RequestId, result: Any) -> bytes:
        self._incoming.pop(request_id, None)
        return encode({"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(self, request_id: RequestId, code: int, message: str) -> bytes:
        self._incoming.pop(request_id, None)
        return encode({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})

    @property
    def pending_outgoing(self) -> dict[RequestId, str]:
        """Our requests still awaiting an answer, by id (a read-only view by convention)."""
        return self._outgoing

    @property
    def open_incoming(self) -> dict[RequestId, str]:
        """Agent requests we have not answered yet, by id."""
        return self._incoming

    # -- what we receive ----------------------------------------------------------------------

    def receive(self, line: bytes) -> Incoming:
        """Classify one line. Never raises for bad input: it becomes :class:`MalformedLine`."""
        if line.count(b"[") + line.count(b"{") > MAX_NESTING and nesting_exceeds(line):  # cheap test first
            return self._unreadable(f"the line nests deeper than {MAX_NESTING} levels", line)
        try:
            message = _loads(line)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
            return self._unreadable("the line is not valid JSON", line)
        except RecursionError:  # cannot happen below MAX_NESTING; never let it escape anyway
            return self._unreadable("the line nests too deeply to parse", line)
        if type(message) is not dict:
            return MalformedLine("the line is not a JSON-RPC object", _excerpt(line))
        method = message.get("method")
        if method is not None:
            if type(method) is not str:
                return MalformedLine("the method is not a string", _excerpt(line))
            params = message.get("params")
            if "id" not in message:
                return RpcNotification(method, params)
            request_id = message["id"]
            if not _valid_id(request_id):
                return MalformedLine("the request id is neither a number nor a string", _excerpt(line))
            self._incoming[request_id] = method
            return Request(request_id, method, params)
        if "id" in message and ("result" in message or "error" in message):
            return self._response(message, line)
        return MalformedLine("the object is neither a request, a notification nor a response", _excerpt(line))

    def _unreadable(self, reason: str, line: bytes) -> MalformedLine:
        # A line that names one of our pending ids may have been its answer.
        match = _ID.search(line)
        reply_to = int(match.group(1)) if match is not None else None
        return MalformedLine(
            reason, _excerpt(line), reply_to if reply_to in self._outgoing else None, cut=len(line) > _EXCERPT
        )

    def _response(self, message: JsonObject, line: bytes) -> Response | StrayResponse | MalformedLine:
        request_id = message["id"]
        if not _valid_id(request_id) or request_id not in self._outgoing:
            return StrayResponse(request_id)
        method = self._outgoing.pop(request_id)
        error = message.get("error")
        if error is None:
            return Response(request_id, method, result=message.get("result"))
        if type(error) is not dict or type(error.get("code")) is not int:
            body = RpcErrorBody(0, "the agent sent an error without a numeric code", error)
        else:
            text = error.get("message")
            body = RpcErrorBody(error["code"], text if isinstance(text, str) else "", error.get("data"))
        return Response(request_id, method, error=body)

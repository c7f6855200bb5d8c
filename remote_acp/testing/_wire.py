"""The scripted agent's line I/O: the stdin reader thread and its queue, and the only stdout writer."""

from __future__ import annotations

import json
import os
import queue
import threading

from remote_acp.testing._process import TYPE_CHECKING, hard_exit, log

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, BinaryIO, TypeAlias

    Json: TypeAlias = dict[str, Any]

PIECE = 64 * 1024


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


class StdinReader:
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

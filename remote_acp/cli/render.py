"""Rendering session events for a person (streaming text) or a program (JSON lines).

Whatever the agent sends must never break the output: JSON lines are pure ASCII (every other
character, a lone surrogate included, is escaped), and human output replaces what the stream's
encoding cannot carry. Nothing here writes on the event loop's thread (see :mod:`.streams`): a
reader that stops reading slows the run down, never stops it. A failed write raises
:class:`OutputError` so the run can end cleanly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..events import Event, Malformed, Notification, OtherMessage, SessionStarted, TokenUsage, ToolResult, TurnEnded
from ..masking import escape_control
from .jsonl import json_line
from .streams import Output, OutputError

if TYPE_CHECKING:
    from .streams import OutputStream

__all__ = ["HumanRenderer", "JsonRenderer", "OutputError", "json_line", "token_note"]


def token_note(usage: TokenUsage) -> str:
    """A measured turn's figures for a person: ``tokens: 1234 in, 56 out, 200 cache-read (model)``."""
    return (
        f"tokens: {usage.input_tokens} in, {usage.output_tokens} out, {usage.cache_read_tokens} cache-read "
        f"({usage.model})"
    )


class JsonRenderer:
    """One JSON object per line on stdout: events, turn results, then the run result."""

    def __init__(self, output: Output) -> None:
        self.output = output
        self._out = output.out

    async def event(self, event: Event) -> None:
        data = (json_line(event.to_json()) + "\n").encode("ascii")
        if not self._out.try_write(data):
            await self._out.write(data)

    def result(self, obj: dict[str, Any]) -> None:
        """A ``turn_result`` or the ``run_result``: never dropped, written ahead of nothing."""
        self._out.put((json_line(obj) + "\n").encode("ascii"))


class HumanRenderer:
    """Agent text streams to stdout as it arrives; notices and progress go to stderr."""

    def __init__(self, output: Output, show_replay: bool = False) -> None:
        self.output = output
        self._out = output.out
        self._err = output.err
        self._encoding = output.encoding
        self._show_replay = show_replay
        self._text_open = False

    def _encode(self, text: str) -> bytes:
        # The agent's reply keeps its lines and tabs; nothing it sends drives the terminal (a
        # title, a cleared screen, a carriage return over the line before).
        return escape_control(text, keep_newlines=True).encode(self._encoding, "replace")

    def _encode_note(self, text: str) -> bytes:
        # As Python's own stderr does: what cannot be encoded stays legible as an escape. A notice
        # quotes what an agent or a host wrote (names, messages, stderr): one line, escaped.
        return f"remote-acp: {escape_control(text)}\n".encode(self._encoding, "backslashreplace")

    async def _end_text(self) -> None:
        if self._text_open:
            self._text_open = False
            await self._out.write(b"\n")

    async def note(self, text: str) -> None:
        await self._end_text()
        # Notices are diagnostics, like log lines: a stderr that cannot be written (closed, full)
        # loses them but does not fail a run whose output is fine.
        await _quietly(self._err, self._encode_note(text))

    def note_now(self, text: str) -> None:
        """A notice from outside a coroutine (a callback): written if there is room, else dropped."""
        self._err.offer(self._encode_note(text))

    def last_note(self, text: str) -> None:
        """The run's closing line, never dropped for a full buffer (written if stderr can be)."""
        if self._text_open:
            self._text_open = False
            self._out.put(b"\n")
        try:
            self._err.put(self._encode_note(text))
        except OutputError:
            pass

    async def event(self, event: Event) -> None:
        if getattr(event, "replayed", False) and not self._show_replay:
            return
        if isinstance(event, Notification):
            if event.delta is not None:
                self._text_open = True
                data = self._encode(event.delta)
                if not self._out.try_write(data):
                    await self._out.write(data)
            elif self._text_open:
                await self._end_text()  # the streamed message is complete
            else:
                await self.note(event.message)
        elif isinstance(event, OtherMessage):
            await self.note(event.message)
        elif isinstance(event, ToolResult):
            status = "failed" if event.error else "done"
            await self.note(f"tool {event.tool_name} {status} in {event.duration_ms} ms: {event.message}")
        elif isinstance(event, Malformed):
            await self.note(
                f"malformed input from the agent: {event.message}" + (f" ({event.detail})" if event.detail else "")
            )
        elif isinstance(event, TokenUsage):
            await self.note(token_note(event))
        elif isinstance(event, TurnEnded):
            await self._end_text()
        elif isinstance(event, SessionStarted):
            pass


async def _quietly(stream: OutputStream, data: bytes) -> None:
    try:
        await stream.write(data)
    except OutputError:
        pass

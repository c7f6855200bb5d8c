"""Prompt scripts: directive parsing and the plan of one turn built from them."""

from __future__ import annotations

from remote_acp.testing._process import TYPE_CHECKING, log

if TYPE_CHECKING:
    from collections.abc import Callable


class TurnPlan:
    """What one prompt turn does; built from ``--script`` defaults plus the prompt's directives.

    The class holds the defaults; :func:`build_plan` sets what the directives change.
    """

    reply: str
    drip: int = 0  # @drip=N: N numbered chunks first, one every drip_ms (a turn that streams over time)
    drip_ms: int = 100
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
    # Hostile text. The ``*-from`` directives name an environment variable of the agent whose
    # value is sent (so a test can quote a secret or control characters back):
    title_from: str | None = None  # @title-from=NAME: tool call "call-q" titled $NAME, completed
    stop_from: str | None = None  # @stop-from=NAME: the prompt is answered with stopReason $NAME
    update_from: str | None = None  # @update-from=NAME: a session/update whose sessionUpdate is $NAME
    say_from: str | None = None  # @say-from=NAME: the reply is $NAME, three characters per chunk
    garbage_lines: int = 0  # @garbage-lines=N: N lines "this is not json", in one write
    long_tool_id: int = 0  # @long-tool-id=N: a completed tool call whose id is N characters long
    mcp_servers: bool = False  # @mcp-servers: say the tool servers the session was given
    # File access through the client (what an agent does once fs.readTextFile is advertised):
    read: str | None = None  # @read=PATH: fs/read_text_file, then say what came back
    read_line: int | None = None  # @read-line=N: its 1-based first line
    read_limit: int | None = None  # @read-limit=N: its most lines
    write: str | None = None  # @write=PATH: fs/write_text_file with the reply words as content

    def __init__(self, reply: str = "ok") -> None:
        self.reply = reply


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
    "drip": ("drip", _count),
    "drip-ms": ("drip_ms", _count),
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
    "title-from": ("title_from", _required),
    "stop-from": ("stop_from", _required),
    "update-from": ("update_from", _required),
    "say-from": ("say_from", _required),
    "garbage-lines": ("garbage_lines", _count),
    "long-tool-id": ("long_tool_id", _count),
    "mcp-servers": ("mcp_servers", _flag),
    "read": ("read", _required),
    "read-line": ("read_line", _count),
    "read-limit": ("read_limit", _count),
    "write": ("write", _required),
}


class Script:
    """Parsed prompt text (or ``--script``): reply words and ``(name, value)`` directives."""

    __slots__ = ("directives", "words")

    def __init__(self, words: tuple[str, ...], directives: tuple[tuple[str, str | None], ...]) -> None:
        self.words = words
        self.directives = directives

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


def drip_text(index: int) -> str:
    """The text of ``@drip``'s chunk ``index`` (from 1): ``chunk-0001 `` and on, four digits at least."""
    return f"chunk-{index:04d} "


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

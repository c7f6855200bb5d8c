"""Session options with the defaults of the behaviour contract, shared by the library and the CLI."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from .framing import DEFAULT_MAX_LINE_BYTES

__all__ = ["SessionOptions"]

PositiveMs = Annotated[int, Field(gt=0)]


class SessionOptions(BaseModel):
    """Bounds and the agent command of one session. Every wait is bounded and configurable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str | list[str] = Field(
        description="The agent runtime and its protocol-mode switch, e.g. 'qwen --acp'. A string is "
        "split with POSIX shell rules on a local launch; a list is used as is."
    )
    read_timeout_ms: PositiveMs = Field(
        5_000,
        description="Bound of every synchronous wait: session/new, accepting a turn, the answer after "
        "session/cancel, the end of stream after a failed write.",
    )
    turn_timeout_ms: PositiveMs = Field(3_600_000, description="A turn running longer is cancelled (turn_timeout).")
    stall_timeout_ms: int = Field(
        300_000, description="A turn with no event for this long is cancelled; 0 or less disables it."
    )
    stop_grace_ms: PositiveMs = Field(5_000, description="The graceful teardown window, from teardown start.")
    initialize_floor_ms: PositiveMs = Field(
        60_000, description="initialize waits max(read_timeout_ms, this): some runtimes start slowly."
    )
    max_line_bytes: PositiveMs = Field(DEFAULT_MAX_LINE_BYTES, description="Longest line accepted from the agent.")
    max_retry_backoff_ms: PositiveMs = Field(300_000, description="Cap of the retry backoff.")
    output_drain_ms: PositiveMs = Field(
        5_000,
        description="After the agent exits, how long a descendant may keep its stdout open before the "
        "session closes it.",
    )
    stderr_tail_bytes: PositiveMs = Field(8_192, description="How much of the agent's stderr is kept.")

    @property
    def initialize_timeout_ms(self) -> int:
        return max(self.read_timeout_ms, self.initialize_floor_ms)

"""What a run's turns spent, as the run's closing lines and its JSON say it: totals over the
measured turns, the turns that came with no figure, and the run's token ceiling."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..events import TokenUsage

__all__ = ["RunTokens"]


class RunTokens:
    """What the run's turns spent: totals over the measured turns, and the turns with no figure."""

    def __init__(self, max_tokens: int | None) -> None:
        self.max_tokens = max_tokens
        self.measured_turns = 0
        self.unmeasured_turns = 0
        self.input = self.output = self.cache_read = self.total = 0
        self.models: list[str] = []

    def add(self, usage: TokenUsage) -> None:
        self.input += usage.input_tokens
        self.output += usage.output_tokens
        self.cache_read += usage.cache_read_tokens
        self.total += usage.total_tokens
        if usage.model not in self.models:
            self.models.append(usage.model)

    def turn_ended(self, measured: bool) -> None:
        if measured:
            self.measured_turns += 1
        else:
            self.unmeasured_turns += 1

    @property
    def reached(self) -> bool:
        return self.max_tokens is not None and self.measured_turns > 0 and self.total >= self.max_tokens

    def ceiling(self) -> str | None:
        """``None`` without a ceiling or a turn; else ``reached``, ``not bounded`` (a turn ran
        unmeasured), or ``within``."""
        if self.max_tokens is None or self.measured_turns + self.unmeasured_turns == 0:
            return None
        if self.reached:
            return "reached"
        return "not bounded" if self.unmeasured_turns else "within"

    def to_json(self) -> dict[str, Any]:
        measured = self.measured_turns > 0
        return {
            "measured_turns": self.measured_turns,
            "unmeasured_turns": self.unmeasured_turns,
            # Never zero for what nobody measured: no figure at all is null.
            "input_tokens": self.input if measured else None,
            "output_tokens": self.output if measured else None,
            "cache_read_tokens": self.cache_read if measured else None,
            "total_tokens": self.total if measured else None,
            "models": list(self.models),
            "max_tokens": self.max_tokens,
            "ceiling": self.ceiling(),
        }

    def summary(self) -> list[str]:
        """The closing notes of a text run (none when no turn ran)."""
        turns = self.measured_turns + self.unmeasured_turns
        if turns == 0:
            return []
        if self.measured_turns == 0:
            lines = ["tokens: not measured"]
        else:
            line = (
                f"tokens this run: {self.input} in, {self.output} out, {self.cache_read} cache-read, {self.total} total"
            )
            if self.unmeasured_turns:
                line += f" ({self.unmeasured_turns} of {turns} turns not measured: a lower bound)"
            lines = [line]
        if self.ceiling() == "not bounded":
            if self.measured_turns == 0:
                lines.append("run reported no token usage, token ceiling could not bound it")
            else:
                lines.append(
                    f"{self.unmeasured_turns} turns reported no token usage, token ceiling could not bound them"
                )
        return lines

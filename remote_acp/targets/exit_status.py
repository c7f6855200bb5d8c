"""How a launched process ended (a leaf module: targets and the process both speak of it)."""

from __future__ import annotations

import signal
from dataclasses import dataclass

__all__ = ["ExitStatus"]


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How the process ended: an exit code or a signal number."""

    code: int | None
    signal: int | None = None

    def describe(self) -> str:
        if self.code is None and self.signal is None:
            return "an unknown exit status (the process was reaped elsewhere)"
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = str(self.signal)
            return f"killed by signal {name}"
        return f"exit status {self.code}"

"""What a measurement source is: a runtime it reads, how it arms a start, how it reads a turn.

A source reads figures the runtime writes on the machine that ran it, outside the protocol.
:class:`Source` says which runtime (by the name its handshake reports and by how a command names
it) and arms a start: a private temporary directory (mode 0700) and the environment that makes
the runtime write its records there. :class:`Armed` is one armed start: it reads the records of a
session incrementally and removes its directory when it is no longer used.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .telemetry import TokenRecord

__all__ = ["Armed", "Source"]


class Armed(ABC):
    """One start's arming of a source: its environment, its private directory, its reader."""

    def __init__(self, source: Source) -> None:
        self.source = source
        # mkdtemp creates the directory with mode 0700: only this user can read the records.
        self.directory = Path(tempfile.mkdtemp(prefix=f"remote-acp-{source.runtime}-"))

    @property
    @abstractmethod
    def env(self) -> dict[str, str]:
        """The variables the runtime is started with (added to the target's environment)."""

    @abstractmethod
    def read(self, session_id: str) -> list[TokenRecord]:
        """The complete records of ``session_id`` written since the last read (blocking I/O)."""

    def close(self) -> None:
        """Remove the directory and whatever the runtime wrote there."""
        shutil.rmtree(self.directory, ignore_errors=True)


class Source(ABC):
    """A measurement source for one runtime."""

    runtime: str
    """The ``agentInfo.name`` the runtime's handshake reports (its version is not checked)."""
    window_s: float
    """How long after a turn's answer its records may take to be written (the runtime's batching):
    a wait shorter than this may end before the source could answer."""

    @abstractmethod
    def names(self, argv: Sequence[str]) -> bool:
        """Whether a command (the program and every argument) names this runtime."""

    @abstractmethod
    def arm(self) -> Armed:
        """Arm one start: create the private directory and the environment."""

    def __repr__(self) -> str:
        return f"<source {self.runtime}>"


def basename(arg: str) -> str:
    return os.path.basename(arg.rstrip("/"))

"""What the gemini-cli integration tests share: the installed runtime, the mock, options and targets.

A test module imports the fixtures it uses by name (``from integration.gemini_fixtures import
gemini_installed, gemini_mock``), which registers them for that module, and asks for the runtime
with ``pytest.mark.usefixtures("gemini_installed")``: a missing runtime fails, never skips.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from remote_acp import LocalTarget, SessionOptions
from tests.support.agents import fast_options
from tests.support.gemini import GEMINI_VERSION, gemini_command, gemini_env, gemini_executable
from tests.support.gemini_mock import GeminiMock

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

__all__ = ["gemini_installed", "gemini_mock", "gemini_options", "gemini_target"]


@pytest.fixture(scope="module")
def gemini_installed() -> Path:
    exe = gemini_executable()
    if exe is None:
        pytest.fail(
            f"gemini-cli {GEMINI_VERSION} is not installed under .tools/gemini: run scripts/install-gemini.sh "
            "(idempotent; it installs the pinned release into .tools/gemini)",
            pytrace=False,
        )
    return exe


@pytest.fixture
def gemini_mock() -> Iterator[GeminiMock]:
    with GeminiMock() as server:
        yield server


def gemini_options(command: str | Sequence[str] | None = None, **overrides: Any) -> SessionOptions:
    """Generous bounds: gemini takes about 4 s to answer initialize, more on a loaded machine.
    ``read_timeout_ms`` 15 s also leaves the telemetry's 5 s batching room after each turn."""
    values: dict[str, Any] = {
        "read_timeout_ms": 15_000,
        "initialize_floor_ms": 60_000,
        "turn_timeout_ms": 40_000,
        "stall_timeout_ms": 40_000,
        "stop_grace_ms": 3_000,
        "output_drain_ms": 2_000,
    }
    values.update(overrides)
    return fast_options(list(command) if command is not None else gemini_command(), **values)


def gemini_target(home: Path, mock: GeminiMock, **extra: str) -> LocalTarget:
    """A local target whose environment is exactly ``gemini_env`` (plus ``extra``), passed whole."""
    env = gemini_env(home, mock) | extra
    return LocalTarget(env_allowlist=tuple(env), extra_env=env)

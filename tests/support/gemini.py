"""Helpers to launch the real gemini-cli runtime (pinned, see ``scripts/install-gemini.sh``) offline.

Typical use, with an isolated home per test and the mock Gemini API::

    exe = gemini_executable()                    # None -> fail: run scripts/install-gemini.sh
    with GeminiMock() as mock:
        env = gemini_env(tmp_home, mock)          # also writes tmp_home/.gemini/settings.json
        argv = gemini_command()                   # [gemini, "--acp", "--skip-trust"]

``gemini`` (``bundle/gemini.js``) relaunches itself as a child node process and ignores SIGTERM in
the parent, so it is stopped by signalling the whole process group (which the session does). The
telemetry variables are not set here: arming them is the measurement source's job.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .gemini_mock import GeminiMock

__all__ = ["GEMINI_VERSION", "SETTINGS", "gemini_command", "gemini_env", "gemini_executable"]

#: The gemini-cli release the tests are written against (keep in sync with scripts/install-gemini.sh).
GEMINI_VERSION = "0.61.0"
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
_PREFIX = REPO_ROOT / ".tools" / "gemini"
_PACKAGE_JSON = _PREFIX / "node_modules" / "@google" / "gemini-cli" / "package.json"
_EXECUTABLE = _PREFIX / "node_modules" / ".bin" / "gemini"

#: ``$GEMINI_CLI_HOME/.gemini/settings.json``: no usage statistics and no update check, so the CLI
#: resolves no host name and connects nowhere but the mock.
SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}

#: Dropped from the inherited environment: proxies (the requests for 127.0.0.1 would go through
#: them), credentials and endpoints of a real Gemini setup, and telemetry settings a test did not ask for.
_DROPPED_PREFIXES = ("GEMINI_", "GOOGLE_", "OTEL_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
_DROPPED_LOWER = ("http_proxy", "https_proxy", "all_proxy")


def gemini_executable() -> pathlib.Path | None:
    """``.tools/gemini/node_modules/.bin/gemini`` under the repo root, if the pinned version is installed."""
    try:
        version = json.loads(_PACKAGE_JSON.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    if version != GEMINI_VERSION or not os.access(_EXECUTABLE, os.X_OK):
        return None
    return _EXECUTABLE


def gemini_env(home: pathlib.Path, mock: GeminiMock) -> dict[str, str]:
    """The full environment for a gemini subprocess that talks to ``mock`` and keeps its state in
    ``home`` (created, with the settings file)."""
    home = home.resolve()
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS, indent=2) + "\n", encoding="utf-8")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_DROPPED_PREFIXES) and key not in _DROPPED_LOWER
    }
    env.update(
        {
            "HOME": str(home),
            "GEMINI_CLI_HOME": str(home),
            "GEMINI_API_KEY": "fake-key",
            "GOOGLE_GEMINI_BASE_URL": mock.base_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "NO_COLOR": "1",
        }
    )
    return env


def gemini_command(*, model: str | None = None) -> list[str]:
    """``[gemini, "--acp", "--skip-trust"]``, plus ``--model MODEL`` (a pinned model: no routing
    classifier call, one model call per turn)."""
    exe = gemini_executable()
    if exe is None:
        raise FileNotFoundError(
            f"gemini-cli {GEMINI_VERSION} is not installed under {_PREFIX}; run scripts/install-gemini.sh"
        )
    command = [str(exe), "--acp", "--skip-trust"]
    if model is not None:
        command += ["--model", model]
    return command

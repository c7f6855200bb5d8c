"""Helpers to launch the real qwen-code runtime (pinned, see ``scripts/install-qwen.sh``) in ACP mode.

Typical use, with an isolated ``HOME`` per test session and the mock model server::

    exe = qwen_executable()                      # None -> skip: run scripts/install-qwen.sh
    with OpenAIMock() as mock:
        env = qwen_env(tmp_home, mock)            # also writes tmp_home/.qwen/settings.json
        argv = qwen_command(approval_mode="default")
        # spawn argv with env=env, cwd=<workspace>, in a new process group (start_new_session=True)

``qwen`` (``cli-entry.js``) re-executes itself: the launched node process runs a second node process
(``--expose-gc .../cli.js``) with ``spawnSync`` and only relays its exit status, so stop it by
signalling the whole process group, never just the pid.

``--auth-type=openai`` on the command line is enough for ``session/new`` to succeed without an
``authenticate`` call (the key comes from ``OPENAI_API_KEY``).
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .openai_mock import OpenAIMock

__all__ = [
    "QWEN_VERSION",
    "REPO_ROOT",
    "default_settings",
    "qwen_command",
    "qwen_env",
    "qwen_executable",
]

#: The qwen-code release the tests are written against (keep in sync with scripts/install-qwen.sh).
QWEN_VERSION = "0.24.4"
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
_PREFIX = REPO_ROOT / ".tools" / "qwen"
_PACKAGE_JSON = _PREFIX / "node_modules" / "@qwen-code" / "qwen-code" / "package.json"
_EXECUTABLE = _PREFIX / "node_modules" / ".bin" / "qwen"

#: Environment variables dropped from the inherited environment: proxies (qwen would send the
#: requests for 127.0.0.1 through them), a ``QWEN_HOME`` that would escape the isolated ``HOME``, and
#: qwen's own relaunch/update plumbing that leaks in when the tests themselves run under qwen.
_DROPPED_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "QWEN_HOME",
    "QWEN_CODE_RELAUNCH_ARGS",
    "QWEN_CODE_LAUNCHER_PATH",
    "QWEN_CODE_LAUNCHER_PID",
    "QWEN_CODE_MANAGED_NPM_PIN",
    "QWEN_CODE_MANAGED_NPM_ROOT",
    "QWEN_CODE_STARTUP_VERSION",
    "QWEN_CODE_CLI",
    "QWEN_CODE_SESSION_ID",
    "QWEN_CODE_NO_RELAUNCH",
    "QWEN_SANDBOX",
    "SANDBOX",
    "OPENAI_API_BASE",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
)


def qwen_executable() -> pathlib.Path | None:
    """``.tools/qwen/node_modules/.bin/qwen`` under the repo root, if the pinned version is installed."""
    try:
        version = json.loads(_PACKAGE_JSON.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    if version != QWEN_VERSION or not os.access(_EXECUTABLE, os.X_OK):
        return None
    return _EXECUTABLE


def default_settings() -> dict[str, Any]:
    """The user settings written to ``$HOME/.qwen/settings.json``: keep qwen offline and quiet.

    ``privacy.usageStatisticsEnabled`` off stops the usage-statistics uploads (otherwise qwen resolves
    ``*.rum.aliyuncs.com`` at startup); ``general.enableAutoUpdate`` off stops the npm update check;
    ``telemetry.enabled`` off keeps OpenTelemetry off.  ``$version`` 4 is the current settings format,
    so qwen does not migrate (rewrite) the file.
    """
    return {
        "$version": 4,
        "general": {"enableAutoUpdate": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = _merge(current, value)
        else:
            merged[key] = value
    return merged


def qwen_env(
    home: pathlib.Path,
    mock: OpenAIMock,
    *,
    extra_settings: Mapping[str, Any] | None = None,
    api_key: str = "sk-mock",
) -> dict[str, str]:
    """The full environment for a qwen subprocess that talks to ``mock`` and keeps its state in ``home``.

    A copy of ``os.environ`` with ``HOME`` and ``OPENAI_API_KEY``/``OPENAI_BASE_URL``/``OPENAI_MODEL``
    set and proxies removed.  Also creates ``home/.qwen/settings.json`` from :func:`default_settings`
    merged with the existing file and ``extra_settings`` (nested keys, e.g.
    ``{"memory": {"enableManagedAutoMemory": False}}`` to stop the post-turn memory-extraction call).
    """
    home = home.resolve()
    settings_dir = home / ".qwen"
    settings_dir.mkdir(parents=True, exist_ok=True)
    settings_path = settings_dir / "settings.json"
    settings = default_settings()
    try:
        existing = json.loads(settings_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        existing = None
    if isinstance(existing, dict):
        settings = _merge(existing, settings)
    if extra_settings:
        settings = _merge(settings, extra_settings)
    settings_path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")

    env = {key: value for key, value in os.environ.items() if key not in _DROPPED_ENV}
    env.update(
        {
            "HOME": str(home),
            "OPENAI_API_KEY": api_key,
            "OPENAI_BASE_URL": mock.base_url,
            "OPENAI_MODEL": mock.model,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            # Environment overrides of the settings above (they take precedence over settings.json).
            "QWEN_USAGE_STATISTICS_ENABLED": "false",
            "QWEN_TELEMETRY_ENABLED": "false",
            "NO_COLOR": "1",
        }
    )
    return env


def qwen_command(approval_mode: str | None = None) -> list[str]:
    """``[qwen, "--acp", "--auth-type=openai"]`` plus ``--approval-mode=<mode>`` if given.

    Modes: ``plan``, ``default`` (asks ``session/request_permission`` for edits and shell commands),
    ``auto-edit``, ``auto`` (qwen's default: an LLM classifier decides, i.e. a ``"json"`` mock request),
    ``yolo``.
    """
    exe = qwen_executable()
    if exe is None:
        raise FileNotFoundError(
            f"qwen-code {QWEN_VERSION} is not installed under {_PREFIX}; run scripts/install-qwen.sh"
        )
    command = [str(exe), "--acp", "--auth-type=openai"]
    if approval_mode is not None:
        command.append(f"--approval-mode={approval_mode}")
    return command

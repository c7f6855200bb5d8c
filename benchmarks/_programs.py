"""The programs the benchmarks run beside the agent (:mod:`._agents`): our command line, the
official SDK's interpreter, acpx; and our bytecode, compiled before any of them starts.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ._agents import agent_command

__all__ = [
    "ACPX_VERSION",
    "ANCHORS",
    "PY",
    "REPO",
    "Acpx",
    "acpx",
    "cli_argv",
    "ensure_bytecode",
    "sdk_python",
]

REPO = Path(__file__).resolve().parent.parent
ANCHORS = Path(__file__).resolve().parent / "anchors"
PY = sys.executable
"""The interpreter running the benchmark: it runs our client, the raw client and every agent."""

SDK_PYTHON_ENV = "REMOTE_ACP_BENCH_SDK_PYTHON"
ACPX_ENV = "REMOTE_ACP_BENCH_ACPX"
ACPX_VERSION = "0.1.15"
"""The acpx release scripts/install-acpx.sh pins (keep the two in sync)."""


def cli_argv() -> list[str]:
    """The ``remote-acp`` console script of this interpreter's environment."""
    script = Path(PY).parent / "remote-acp"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    found = shutil.which("remote-acp")
    if found:
        return [found]
    return [PY, "-m", "remote_acp.cli.main"]


def _with_acp(python: str) -> str | None:
    """The real executable behind ``python`` (not a pyenv shim) if it can import ``acp``."""
    probe = "import importlib.util as u, sys; print(sys.executable); sys.exit(u.find_spec('acp') is None)"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout.decode().strip() or python) if done.returncode == 0 else None


def sdk_python() -> str | None:
    """An interpreter that can import the official SDK (``acp``).

    ``$REMOTE_ACP_BENCH_SDK_PYTHON`` first, then this interpreter, then ``python3``/``python`` on
    PATH. The SDK client only imports ``acp``; the agent it drives is still run by :data:`PY`.
    """
    explicit = os.environ.get(SDK_PYTHON_ENV)
    if explicit:
        return _with_acp(explicit)
    if importlib.util.find_spec("acp") is not None:
        return PY
    for name in ("python3", "python"):
        found = shutil.which(name)
        real = _with_acp(found) if found else None
        if real:
            return real
    return None


@dataclass(slots=True)
class Acpx:
    """The acpx command line (the Node ACP client), run with a HOME of its own.

    ``exec`` is acpx's one-shot mode: no saved session, nothing written under HOME, the nearest
    equivalent of one ``remote-acp run``. The private HOME keeps a user's ``~/.acpx`` config out.
    """

    exe: str
    home: str

    def env(self) -> dict[str, str]:
        return {**os.environ, "HOME": self.home}

    def argv(self, prompt: str, workspace: str) -> list[str]:
        return [self.exe, "--agent", agent_command(), "--cwd", workspace, "--format", "text", "exec", prompt]


def acpx(home: str) -> tuple[Acpx | None, str]:
    """The pinned acpx, installed by ``scripts/install-acpx.sh`` on first use, and a line saying so.

    ``$REMOTE_ACP_BENCH_ACPX`` names another acpx executable instead. Without node and npm, or
    without the registry, the acpx rows are skipped and the line says why.
    """
    explicit = os.environ.get(ACPX_ENV)
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            return None, f"acpx: {explicit} (from ${ACPX_ENV}) not found; acpx rows skipped"
        return Acpx(found, home), f"acpx: {found} (from ${ACPX_ENV})"
    try:
        done = subprocess.run(
            ["bash", str(REPO / "scripts" / "install-acpx.sh")],
            capture_output=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"acpx: not available, scripts/install-acpx.sh did not finish ({exc}); acpx rows skipped"
    if done.returncode != 0:
        why = " / ".join(done.stderr.decode(errors="replace").strip().splitlines()[-2:])
        return None, f"acpx: not available, scripts/install-acpx.sh failed ({why}); acpx rows skipped"
    exe = done.stdout.decode().strip()
    return Acpx(exe, home), f"acpx: {ACPX_VERSION} ({exe}, node {_node_version()})"


def _node_version() -> str:
    try:
        return subprocess.run(["node", "--version"], capture_output=True, timeout=30).stdout.decode().strip()
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def ensure_bytecode() -> str:
    """Compile the packages' bytecode (``remote_acp`` and ``hostinv``), as ``pip install`` does, so
    no contender compiles sources.

    An editable install with ``PYTHONDONTWRITEBYTECODE`` set would otherwise recompile every
    module of ours (and of the scriptable agent) on every start: tens of milliseconds that a user's
    installed copy never pays.
    """
    results = [compileall.compile_dir(str(REPO / package), quiet=1) for package in ("remote_acp", "hostinv")]
    ok = all(results)  # both compiled, even when the first had errors
    state = "compiled" if ok else "compiled with errors (modules that failed run from source)"
    flag = " (PYTHONDONTWRITEBYTECODE is set: nothing else writes it)" if sys.dont_write_bytecode else ""
    return f"bytecode of remote_acp/ and hostinv/: {state}{flag}"

"""One process, many sessions: the open-file limit is raised where it can be, and running out
of descriptors is a typed error that says what to do, not a retryable start failure."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.agents import scripted

ROOT = Path(__file__).resolve().parents[1]


def limited(soft: int) -> None:
    """In the child: a low soft open-file limit under a high hard one."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


OPEN_UNTIL_FULL = """
import contextlib, sys
import anyio
from remote_acp import RemoteAcpError, SessionOptions, open_session, raise_open_file_limit

async def main() -> None:
    if sys.argv[2] == "raise":
        raise_open_file_limit()
    opts = SessionOptions(command=sys.argv[3:], read_timeout_ms=10_000)
    opened = 0
    try:
        with anyio.fail_after(90):
            # All held open at once; each one is open before the next starts.
            async with contextlib.AsyncExitStack() as sessions:
                for _ in range(12):
                    await sessions.enter_async_context(open_session(sys.argv[1], opts))
                    opened += 1
    except BaseException as exc:
        while isinstance(exc, BaseExceptionGroup):
            exc = exc.exceptions[0]
        if isinstance(exc, RemoteAcpError):
            print("error", exc.kind.value, exc.retryable, exc, flush=True)
        else:
            print("unexpected", repr(exc), flush=True)
    print("opened", opened, flush=True)

anyio.run(main)
"""


def run_controller(workspace: str, mode: str, soft: int) -> str:
    done = subprocess.run(
        [sys.executable, "-c", OPEN_UNTIL_FULL, workspace, mode, *scripted()],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        preexec_fn=lambda: limited(soft),
    )
    assert done.returncode == 0, done.stderr
    assert "opened " in done.stdout, (done.stdout, done.stderr)
    return done.stdout


def test_running_out_of_descriptors_is_a_typed_error_that_names_the_fix(workspace: str) -> None:
    out = run_controller(workspace, "keep", 48)
    errors = [line for line in out.splitlines() if line.startswith("error ")]
    assert errors, out
    error = errors[0]
    assert error.startswith("error port_exit False this process ran out of file descriptors starting the agent")
    assert "open-file limit 48" in error and "ulimit -n" in error and "raise_open_file_limit()" in error


def test_raising_the_limit_lets_the_same_process_hold_the_sessions(workspace: str) -> None:
    out = run_controller(workspace, "raise", 48)
    assert "opened 12" in out, out
    assert "error" not in out


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 4096, reason="a low hard limit here")
def test_the_command_raises_its_soft_limit_for_itself_and_the_agent(workspace: str, tmp_path: Path) -> None:
    seen = tmp_path / "limit"
    agent = f'sh -c \'ulimit -n > {seen}; exec "$0" "$@"\' {" ".join(scripted())}'
    done = subprocess.run(
        [sys.executable, "-m", "remote_acp.cli.main", "run", "--agent", agent, "--workspace", workspace, "hi"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        preexec_fn=lambda: limited(64),
    )
    assert done.returncode == 0, done.stderr
    assert int(seen.read_text()) >= 4096

"""``remote-acp run`` as a real process: a start that fails says its cause, retry class and fix in
``run_result``, whatever the target."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

CLI = [sys.executable, "-m", "remote_acp.cli.main"]


def run(*args: str) -> tuple[int, dict[str, object]]:
    done = subprocess.run([*CLI, "run", "--json", *args], capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, json.loads(done.stdout.splitlines()[-1])


def closed_port() -> int:
    # Bound and closed again: nothing listens there, so a connection is refused at once.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_connection_is_retryable_and_a_fractional_connect_timeout_is_taken() -> None:
    code, result = run(
        "--agent", "true", "--host", f"nobody@127.0.0.1:{closed_port()}", "--workspace", "/tmp",
        "--connect-timeout", "2.5", "--ssh-config", "none", "hi",
    )  # fmt: skip
    assert code == 5
    assert (result["outcome"], result["error_kind"], result["cause"]) == (
        "start_failed",
        "port_exit",
        "connect_refused",
    )
    assert result["retryable"] is True
    assert "Connection refused" in str(result["message"])
    assert str(result["fix"]).startswith("check that sshd runs on the host")


def test_a_missing_local_workspace_is_permanent_with_its_fix(tmp_path: object) -> None:
    missing = f"{tmp_path}/nowhere"
    code, result = run("--agent", "true", "--workspace", missing, "hi")
    assert code == 3
    assert (result["error_kind"], result["cause"], result["retryable"]) == (
        "invalid_workspace_cwd",
        "workspace_invalid",
        False,
    )
    assert result["fix"] == f"pass a workspace that exists, or create it: mkdir -p -- {missing}"


def test_what_a_dying_agent_wrote_reaches_the_terminal_escaped() -> None:
    hostile = "\x1b]0;pwned\x07\x1b[2J\rsession x: turn_completed"
    agent = f"{sys.executable} -m remote_acp.testing.scripted_agent --crash-at initialize --stderr {hostile!r}"
    done = subprocess.run(
        [*CLI, "run", "--agent", agent, "--workspace", "/tmp", "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3, done.stderr  # an agent that exits before it answers: fix the launch
    assert "\x1b" not in done.stderr and "\r" not in done.stderr and "\x07" not in done.stderr
    assert "\\x1b]0;pwned" in done.stderr  # said, as text
    last = done.stderr.splitlines()[-2:]
    assert last[0].startswith("remote-acp: session -: start_failed [port_exit: agent_exited] ")
    assert last[1] == "remote-acp: fix: run the agent command by hand where it runs to see why it stops"

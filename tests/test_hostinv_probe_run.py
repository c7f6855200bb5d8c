"""The probe script, run for real by local shells with the script on stdin, as sshd's login would:
the agent, found on PATH (or not), its version asked and bounded (an agent that hangs, one that
answers at once, one that cannot start, a watcher the probe's death left behind, whose command's
pid another process took), hostile names that stay data, and the script itself.

Each test builds a small world in a temporary directory (an agent that answers, one that hangs, a
missing workspace) and reads the report through the parser, so script and parser are proven
together (tests/support/probe_run.py). Every POSIX sh found here runs the main cases: ``/bin/sh``,
dash, bash, BusyBox. The login shell's lookup is in test_hostinv_probe_login, what the probe says
of the host and the workspace in test_hostinv_probe_host.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from hostinv.probes import PROBE_COMMAND, Verdict, judge_report, parse_report, probe_script
from tests.support import pid_reuse
from tests.support.pid_reuse import namespace_prefix
from tests.support.probe_run import RUN_TIMEOUT_S, SHELLS, SYSTEM_PATH, run_probe, tool_dir, write_script
from tests.support.processes import alive, all_gone, cmdline, processes, wait_for

if TYPE_CHECKING:
    from pathlib import Path

PID_REUSE = pid_reuse.__file__

pytestmark = pytest.mark.process  # every test but two runs a shell, as sshd's login would


@pytest.mark.parametrize("shell_argv", SHELLS)
def test_an_agent_on_path_answers_with_its_version(tmp_path: Path, shell_argv: list[str]) -> None:
    bin_dir = tmp_path / "bin"
    write_script(bin_dir / "fake-agent", 'echo ""\necho "fake-agent 1.2.3 ($1)"\necho second line\n')
    report, _ = run_probe(
        "fake-agent", str(tmp_path), path=f"{bin_dir}:{SYSTEM_PATH}", home=tmp_path, shell_argv=shell_argv
    )
    assert report.agent_found is True
    assert report.agent_path == str(bin_dir / "fake-agent")
    assert report.agent_version == "fake-agent 1.2.3 (--version)"
    assert report.agent_exit == 0 and not report.agent_timed_out
    assert report.os == os.uname().sysname and report.arch == os.uname().machine
    assert report.kernel == os.uname().release
    assert report.cores == os.cpu_count()
    assert report.load is not None and report.mem_total_kib and report.disk_free_kib
    assert report.workspace == "dir" and report.workspace_writable is True
    assert report.garbage_lines == 0 and report.invalid == () and report.unavailable == ()
    judgement = judge_report(report, "fake-agent", str(tmp_path))
    assert judgement.verdict is Verdict.READY and "fake-agent 1.2.3" in judgement.message


@pytest.mark.parametrize("shell_argv", SHELLS)
def test_the_version_lookup_can_be_turned_off(tmp_path: Path, shell_argv: list[str]) -> None:
    # The agent would note that it ran: a check about to start it anyway must not start it twice.
    bin_dir = tmp_path / "bin"
    ran = tmp_path / "ran"
    write_script(bin_dir / "fake-agent", f'echo "$@" >> {ran}\necho fake-agent 1.2.3\n')
    report, out = run_probe(
        "fake-agent",
        str(tmp_path),
        path=f"{bin_dir}:{SYSTEM_PATH}",
        home=tmp_path,
        shell_argv=shell_argv,
        version_lookup=False,
    )
    assert "agent_run=skipped" in out and not ran.exists()
    assert report.agent_found is True and report.agent_path == str(bin_dir / "fake-agent")
    assert (report.agent_exit, report.agent_version, report.agent_timed_out) == (None, None, False)
    assert report.invalid == () and report.garbage_lines == 0
    judgement = judge_report(report, "fake-agent", str(tmp_path))
    assert judgement.verdict is Verdict.READY and "fake-agent at " in judgement.message


def test_a_runtime_warning_before_the_version_is_passed_over(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    warning = "(node:4242) [DEP0040] DeprecationWarning: The `punycode` module is deprecated."
    hint = "(Use `node --trace-deprecation ...` to show where the warning was created)"
    write_script(bin_dir / "node-agent", f"echo '{warning}' >&2\necho '{hint}' >&2\necho 0.0.14\n")
    write_script(bin_dir / "only-warns", f"echo '{warning}' >&2\n")
    report, _ = run_probe("node-agent", "", path=f"{bin_dir}:{SYSTEM_PATH}", home=tmp_path)
    assert report.agent_version == "0.0.14"
    report, _ = run_probe("only-warns", "", path=f"{bin_dir}:{SYSTEM_PATH}", home=tmp_path)
    assert report.agent_version == warning


@pytest.mark.parametrize("shell_argv", SHELLS)
def test_an_agent_that_hangs_on_version_is_bounded_and_leaves_nothing(tmp_path: Path, shell_argv: list[str]) -> None:
    # The agent and a child of its own write their PIDs, then hang: both must be gone when the
    # probe returns, not only once the sleep would have ended.
    pids = tmp_path / "pids"
    bin_dir = tmp_path / "bin"
    write_script(bin_dir / "hangs", f"sleep 300 & echo $! >>{pids}\necho $$ >>{pids}\nexec sleep 301\n")
    report, _ = run_probe("hangs", str(tmp_path), path=f"{bin_dir}:{SYSTEM_PATH}", home=tmp_path, shell_argv=shell_argv)
    assert report.agent_found is True and report.agent_timed_out is True and report.agent_exit is None
    recorded = [int(line) for line in pids.read_text().split()]
    assert len(recorded) == 2
    # Killed before the probe returned; a SIGKILL lands a moment after it is sent.
    assert all_gone(recorded, within=5), [pid for pid in recorded if alive(pid)]
    # Many agents answer --version slowly or not at all and still run: not a failure.
    assert judge_report(report, "hangs", str(tmp_path)).verdict is Verdict.READY


def test_a_quick_agent_never_waits_for_the_bound(tmp_path: Path) -> None:
    """Two hundred probes, fifty at a time, of an agent that answers at once: none waits for its
    watcher's sleep (the bound, 23 s here), and no sleep is left behind. A watcher that trapped
    TERM lost it now and then, or was killed before it had a group of its own to be killed by."""
    bin_dir = tmp_path / "bin"
    write_script(bin_dir / "quick", "echo quick 1.0\n")
    script = probe_script("quick", "", version_timeout_s=23).encode()
    env = {**os.environ, "PATH": f"{bin_dir}:{SYSTEM_PATH}"}
    slowest = 0.0
    for _ in range(4):
        started = time.monotonic()
        runs = [
            subprocess.Popen(
                PROBE_COMMAND.split(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
            )
            for _ in range(50)
        ]
        for run in runs:
            out, _ = run.communicate(script, timeout=RUN_TIMEOUT_S)
            assert parse_report(out.decode()).agent_version == "quick 1.0"
            slowest = max(slowest, time.monotonic() - started)
    assert slowest < 15, f"a probe waited {slowest:.1f} s: its watcher outlived the agent"
    # None left behind (one killed as its probe ended may take a moment to go; a leak stays 23 s).
    wait_for(
        lambda: not processes(lambda pid: cmdline(pid) == b"sleep\x0023\x00"), "the watchers' sleeps to end", within=5
    )


ORPHAN_LIMIT_S = 3  # the probe's steps before the swap take a fraction of it, on a loaded machine too


def _orphaned_watcher(tmp_path: Path, shell: str, *, setsid: bool, swap: bool) -> dict[str, Any]:
    """What tests/support/pid_reuse.py saw, run with ``shell`` as ``/bin/sh`` in a PID namespace of
    its own; skips where there is none to be had."""
    prefix = namespace_prefix()
    binary = shutil.which(shell)
    if prefix is None or binary is None:
        pytest.skip(f"needs {shell} and a PID namespace of our own (unshare, root or user namespaces)")
    bin_dir = tmp_path / "bin"
    write_script(bin_dir / "fake-agent", f'echo "$$" >{tmp_path}/agent-pid\nread -r x <{tmp_path}/agent-fifo\n')
    tools = f"{bin_dir}:{SYSTEM_PATH}" if setsid else f"{bin_dir}:{tool_dir(tmp_path, ['uname', 'sleep', 'pkill'])}"
    script = tmp_path / "probe.sh"
    script.write_text(probe_script("fake-agent", "", version_timeout_s=ORPHAN_LIMIT_S, login_lookup=False))
    mode = "swap" if swap else "keep"
    argv = [*prefix, sys.executable, PID_REUSE, binary, str(script), str(tmp_path), tools, str(ORPHAN_LIMIT_S), mode]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    assert seen["probe_shell"] == [os.stat(binary).st_dev, os.stat(binary).st_ino], seen  # that shell ran it
    return seen


@pytest.mark.parametrize("setsid", [True, False], ids=["setsid", "no-setsid"])
@pytest.mark.parametrize("shell", ["dash", "bash", "busybox"])
def test_an_orphaned_watcher_kills_no_process_that_took_its_command_s_pid(
    tmp_path: Path, shell: str, setsid: bool
) -> None:
    """The probe's shells are killed while the agent's ``--version`` runs (the link dropped), so
    the watcher is orphaned; the agent ends, and another process, leading a process group of its
    own, gets its pid: real pid reuse, forced with ``ns_last_pid`` in a PID namespace of the
    test's own (tests/support/pid_reuse.py). At the end of its limit, the watcher must end
    without killing that process, in each shell as ``/bin/sh`` (the probe's and the watcher's)."""
    seen = _orphaned_watcher(tmp_path, shell, setsid=setsid, swap=True)
    # The pid was taken by another process, before the watcher's limit: the case is real.
    assert seen["agent_ended"] and seen["stranger"] == seen["agent"] and seen["armed"], seen
    assert seen["stranger_start"] != seen["agent_start"], seen
    assert seen["watcher_gone"], seen  # ended at its limit, orphaned or not
    assert seen["stranger_alive"], seen  # and killed nothing that was not its command


@pytest.mark.parametrize("setsid", [True, False], ids=["setsid", "no-setsid"])
@pytest.mark.parametrize("shell", ["dash", "bash", "busybox"])
def test_an_orphaned_watcher_still_kills_its_command(tmp_path: Path, shell: str, setsid: bool) -> None:
    # The control: the same, but the agent runs on past the limit. The watcher reads the same
    # start time again, in each shell, and kills it.
    seen = _orphaned_watcher(tmp_path, shell, setsid=setsid, swap=False)
    assert seen["agent_killed"] and seen["watcher_gone"], seen


def test_a_hanging_agent_is_bounded_without_setsid(tmp_path: Path) -> None:
    # A host without setsid: the agent and its children are found by their parent (pkill -P).
    tools = tool_dir(tmp_path, ["uname", "sleep", "pkill"])
    bin_dir = tmp_path / "bin"
    write_script(bin_dir / "hangs", "sleep 304 &\nexec sleep 302\n")
    report, _ = run_probe("hangs", "", path=f"{bin_dir}:{tools}", home=tmp_path, version_timeout_s=1)
    assert report.agent_timed_out is True


@pytest.mark.parametrize("shell_argv", SHELLS)
def test_a_missing_agent_and_workspace(tmp_path: Path, shell_argv: list[str]) -> None:
    report, _ = run_probe(
        "no-such-agent",
        str(tmp_path / "nowhere"),
        path=SYSTEM_PATH,
        home=tmp_path,
        shell_argv=shell_argv,
        login_shell="/bin/sh",
    )
    assert report.agent_found is False and report.agent_path is None and report.agent_version is None
    assert report.login == "missing" and report.login_dir is None
    assert report.workspace == "missing" and report.workspace_writable is None
    assert report.disk_free_kib is None and "disk_free" not in report.unavailable
    judgement = judge_report(report, "no-such-agent", str(tmp_path / "nowhere"))
    assert judgement.verdict is Verdict.WORKSPACE_INVALID
    assert "does not exist" in judgement.message and "agent_not_found" in judgement.message
    assert judgement.fix and "mkdir -p" in judgement.fix


def test_an_agent_that_cannot_start_is_agent_failed(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    (bin_dir).mkdir()
    agent = bin_dir / "broken"
    agent.write_text("#!/nonexistent/interpreter\n")
    agent.chmod(0o755)
    report, _ = run_probe("broken", "", path=f"{bin_dir}:{SYSTEM_PATH}", home=tmp_path)
    assert report.agent_found is True and report.agent_exit in (126, 127)
    assert judge_report(report, "broken").verdict is Verdict.AGENT_FAILED


HOSTILE = "x'\"; $(touch PWNED) `touch PWNED2` \\\n$(touch PWNED3)\nos=Evil"


@pytest.mark.parametrize("shell_argv", SHELLS)
def test_hostile_agent_and_workspace_are_data(tmp_path: Path, shell_argv: list[str]) -> None:
    # Missing, then present: in both cases nothing in them runs and they arrive byte for byte.
    report, _ = run_probe(HOSTILE, HOSTILE, path=SYSTEM_PATH, home=tmp_path, shell_argv=shell_argv)
    assert report.agent_found is False and report.workspace == "missing" and report.os != "Evil"
    name = HOSTILE.replace("/", "_")
    (tmp_path / name).mkdir()
    bin_dir = tmp_path / "bin"
    # Its version line tries to forge a field and carries a terminal escape and a CR.
    write_script(bin_dir / name, "printf 'v9=1\\033[31m\\r\\nos=Evil\\n#hostinv-probe end\\n'\n")
    report, out = run_probe(
        name, name, path=f"{bin_dir}:{SYSTEM_PATH}", home=tmp_path, shell_argv=shell_argv, cwd=tmp_path
    )
    # Control characters come back masked: the report is safe to print as it is.
    assert report.agent_found is True and report.agent_path == str(bin_dir / name).replace("\n", "\ufffd")
    assert report.workspace == "dir"
    assert report.agent_version == "v9=1\ufffd[31m"  # CR stripped at the end, ESC masked
    assert report.os == os.uname().sysname
    assert "\x1b" not in out
    assert not list(tmp_path.rglob("PWNED*"))


def test_a_hostile_path_cannot_forge_a_key(tmp_path: Path) -> None:
    evil_dir = tmp_path / "a\nagent=found\nos=Evil"
    evil_dir.mkdir()
    report, out = run_probe("nothing-here", "", path=f"{evil_dir}:{SYSTEM_PATH}", home=tmp_path)
    assert report.os == os.uname().sysname and report.agent_found is False
    assert report.path and report.path.startswith(str(tmp_path) + "/a\ufffdagent=found")
    assert "\nos=Evil" not in out


def test_the_script_refuses_what_no_shell_can_hold() -> None:
    with pytest.raises(ValueError, match="NUL"):
        probe_script("a\0b", "")
    with pytest.raises(ValueError, match="empty"):
        probe_script("", "")
    with pytest.raises(ValueError, match="seconds"):
        probe_script("a", "", version_timeout_s=0)


def test_the_command_is_the_same_line_for_every_login_shell() -> None:
    # No quote, $, backslash, ! or newline: fish, csh and sh read it alike.
    assert not set(PROBE_COMMAND) & set("'\"$\\!\n`;&|")
    assert "PWNED" not in PROBE_COMMAND


def test_the_probe_modules_import_nothing_of_remote_acp_or_asyncssh() -> None:
    # DESIGN §2: hostinv never imports remote_acp; asyncssh is imported lazily, by the runner only.
    code = (
        "import sys, hostinv.probes; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('remote_acp', 'asyncssh')); "
        "print(bad)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=True
    )
    assert done.stdout.strip() == "[]"

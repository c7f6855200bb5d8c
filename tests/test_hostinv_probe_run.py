"""The probe script, run for real by local shells with the script on stdin, as sshd's login would.

Each test builds a small world in a temporary directory (an agent that answers, one that hangs,
a workspace that is missing or read-only, a login profile that adds a directory to PATH, a PATH
without ``getconf`` or ``df``) and reads the report through the parser, so script and parser are
proven together. Every POSIX sh found here runs the main cases: ``/bin/sh``, dash, bash, BusyBox.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hostinv.probes import PROBE_COMMAND, ProbeReport, Verdict, judge_report, parse_report, probe_script
from tests.support.processes import alive, all_gone, cmdline, processes, wait_for, wait_for_file

pytestmark = pytest.mark.process  # every test but two runs a shell, as sshd's login would

RUN_TIMEOUT_S = 60  # generous: a loaded 2-core machine; the probe itself bounds what it runs

_SHELLS = [
    pytest.param(argv, id=argv[-1] if len(argv) == 1 else "busybox")
    for argv in (["/bin/sh"], ["dash"], ["bash"], ["busybox", "sh"])
    if shutil.which(argv[0])
]


def _tool_dir(root: Path, tools: list[str]) -> Path:
    """A directory with links to only ``tools``: a host that lacks the others."""
    bin_dir = root / "tools"
    bin_dir.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return bin_dir


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def run_probe(
    agent: str,
    workspace: str,
    *,
    path: str,
    shell_argv: list[str] | None = None,
    login_shell: str = "/bin/sh",
    home: Path,
    cwd: Path | None = None,
    extra_env: dict[str, str] | None = None,
    prefix: list[str] | None = None,
    **options: int | bool,
) -> tuple[ProbeReport, str]:
    """Run the probe as the remote side does: the shell reads the script on stdin."""
    argv = [*(prefix or []), *(shell_argv or PROBE_COMMAND.split())]
    if argv[-1] != "-s":
        argv.append("-s")
    env = {**os.environ, "PATH": path, "SHELL": login_shell, "HOME": str(home), **(extra_env or {})}
    done = subprocess.run(
        argv,
        input=probe_script(agent, workspace, **options).encode(),  # type: ignore[arg-type]
        capture_output=True,
        env=env,
        cwd=cwd or home,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    out = done.stdout.decode(errors="replace")
    assert done.returncode == 0, (done.returncode, out, done.stderr)
    return parse_report(out), out


SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.mark.parametrize("shell_argv", _SHELLS)
def test_an_agent_on_path_answers_with_its_version(tmp_path: Path, shell_argv: list[str]) -> None:
    bin_dir = tmp_path / "bin"
    _script(bin_dir / "fake-agent", 'echo ""\necho "fake-agent 1.2.3 ($1)"\necho second line\n')
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


@pytest.mark.parametrize("shell_argv", _SHELLS)
def test_the_version_lookup_can_be_turned_off(tmp_path: Path, shell_argv: list[str]) -> None:
    # The agent would note that it ran: a check about to start it anyway must not start it twice.
    bin_dir = tmp_path / "bin"
    ran = tmp_path / "ran"
    _script(bin_dir / "fake-agent", f'echo "$@" >> {ran}\necho fake-agent 1.2.3\n')
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
    _script(bin_dir / "node-agent", f"echo '{warning}' >&2\necho '{hint}' >&2\necho 0.0.14\n")
    _script(bin_dir / "only-warns", f"echo '{warning}' >&2\n")
    report, _ = run_probe("node-agent", "", path=f"{bin_dir}:{SYSTEM_PATH}", home=tmp_path)
    assert report.agent_version == "0.0.14"
    report, _ = run_probe("only-warns", "", path=f"{bin_dir}:{SYSTEM_PATH}", home=tmp_path)
    assert report.agent_version == warning


@pytest.mark.parametrize("shell_argv", _SHELLS)
def test_an_agent_that_hangs_on_version_is_bounded_and_leaves_nothing(tmp_path: Path, shell_argv: list[str]) -> None:
    # The agent and a child of its own write their PIDs, then hang: both must be gone when the
    # probe returns, not only once the sleep would have ended.
    pids = tmp_path / "pids"
    bin_dir = tmp_path / "bin"
    _script(bin_dir / "hangs", f"sleep 300 & echo $! >>{pids}\necho $$ >>{pids}\nexec sleep 301\n")
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
    _script(bin_dir / "quick", "echo quick 1.0\n")
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


def test_a_hanging_agent_is_bounded_without_setsid(tmp_path: Path) -> None:
    # A host without setsid: the agent and its children are found by their parent (pkill -P).
    tools = _tool_dir(tmp_path, ["uname", "sleep", "pkill"])
    bin_dir = tmp_path / "bin"
    _script(bin_dir / "hangs", "sleep 304 &\nexec sleep 302\n")
    report, _ = run_probe("hangs", "", path=f"{bin_dir}:{tools}", home=tmp_path, version_timeout_s=1)
    assert report.agent_timed_out is True


@pytest.mark.parametrize("shell_argv", _SHELLS)
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


def test_a_workspace_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    report, _ = run_probe("sh", "afile", path=SYSTEM_PATH, home=tmp_path)
    assert report.workspace == "not_dir"
    assert judge_report(report, "sh", "afile").verdict is Verdict.WORKSPACE_INVALID


def test_a_relative_workspace_is_read_from_the_login_directory(tmp_path: Path) -> None:
    (tmp_path / "-dash-first").mkdir()
    report, _ = run_probe("sh", "-dash-first", path=SYSTEM_PATH, home=tmp_path)
    assert report.workspace == "dir" and report.disk_free_kib


@pytest.mark.skipif(not shutil.which("setpriv") or os.geteuid() != 0, reason="needs root and setpriv")
def test_a_read_only_workspace(tmp_path: Path) -> None:
    # As root every directory is writable, so the probe runs as nobody against a root-owned one.
    root = Path(tempfile.mkdtemp(prefix="hostinv-ro-"))
    try:
        root.chmod(0o755)
        workspace = root / "ws"
        workspace.mkdir(mode=0o755)
        report, _ = run_probe(
            "sh",
            str(workspace),
            path=SYSTEM_PATH,
            home=root,
            cwd=root,
            prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"],
        )
    finally:
        shutil.rmtree(root)
    assert report.workspace == "dir" and report.workspace_writable is False
    judgement = judge_report(report, "sh", str(workspace))
    assert judgement.verdict is Verdict.WORKSPACE_INVALID and "not writable" in judgement.message


# Each login shell, with the agent's directory added where users of that shell add it; sh, bash
# and zsh in files only an interactive login reads, to prove the probe asks as `ssh host` would.
_LOGIN_SETUPS = {
    "bash": {
        ".bash_profile": ". ~/.bashrc\n",
        ".bashrc": 'case $- in *i*) ;; *) return ;; esac\nPATH="$PATH:__DIR__"\n',
    },
    "dash": {".profile": 'PATH="$PATH:__DIR__"; export PATH\n'},
    "zsh": {".zshrc": 'path+=("__DIR__")\n'},
    "ksh": {".profile": 'PATH="$PATH:__DIR__"; export PATH\n'},
    "fish": {".config/fish/config.fish": 'if status is-login\n  set -gx PATH $PATH "__DIR__"\nend\n'},
    "tcsh": {".login": 'setenv PATH "${PATH}:__DIR__"\n'},
    "csh": {".login": 'setenv PATH "${PATH}:__DIR__"\n'},
}


@pytest.mark.parametrize("login", [name for name in _LOGIN_SETUPS if shutil.which(name)])
def test_an_agent_only_a_login_shell_finds(tmp_path: Path, login: str) -> None:
    home = tmp_path / "home"
    agent_dir = tmp_path / "opt agent" / "bin"  # a space: the directory travels as data
    _script(agent_dir / "late-agent", "echo late 0.1\n")
    for name, text in _LOGIN_SETUPS[login].items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text.replace("__DIR__", str(agent_dir)))
    login_shell = shutil.which(login)
    assert login_shell
    report, _ = run_probe("late-agent", str(tmp_path), path=SYSTEM_PATH, home=home, login_shell=login_shell)
    assert report.agent_found is False
    assert report.login == "found", report
    assert report.login_dir == str(agent_dir)
    assert report.login_path and str(agent_dir) in report.login_path
    judgement = judge_report(report, "late-agent", str(tmp_path))
    assert judgement.verdict is Verdict.AGENT_NOT_FOUND
    assert judgement.fix and str(agent_dir) in judgement.fix and "login shell finds it" in judgement.message


def test_the_login_lookup_can_be_turned_off_and_is_skipped_for_a_path(tmp_path: Path) -> None:
    # A profile that would find the agent, and leave a trace if it ran.
    (tmp_path / ".profile").write_text(f"touch {tmp_path}/PROFILE-RAN\nPATH=$PATH:{tmp_path}\n")
    _script(tmp_path / "late-agent", "echo late\n")
    report, _ = run_probe("late-agent", "", path=SYSTEM_PATH, home=tmp_path, login_lookup=False)
    assert report.agent_found is False and report.login == "skipped" and report.login_path is None
    report, _ = run_probe("./no/such/agent", "", path=SYSTEM_PATH, home=tmp_path)
    assert report.agent_found is False and report.login == "skipped"
    assert not (tmp_path / "PROFILE-RAN").exists()
    report, _ = run_probe("late-agent", "", path=SYSTEM_PATH, home=tmp_path)
    assert report.login == "found" and (tmp_path / "PROFILE-RAN").exists()  # the control: it would have


def test_a_login_shell_that_hangs_is_bounded(tmp_path: Path) -> None:
    (tmp_path / ".profile").write_text("sleep 303\n")
    report, _ = run_probe("late-agent", "", path=SYSTEM_PATH, home=tmp_path, login_shell="/bin/sh", login_timeout_s=1)
    assert report.login == "timeout"
    judgement = judge_report(report, "late-agent")
    assert judgement.verdict is Verdict.AGENT_NOT_FOUND and "did not answer in time" in judgement.message


def test_a_login_shell_that_runs_no_commands(tmp_path: Path) -> None:
    nologin = shutil.which("nologin") or shutil.which("false")
    assert nologin
    report, _ = run_probe("late-agent", "", path=SYSTEM_PATH, home=tmp_path, login_shell=nologin)
    assert report.login == "failed"


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


@pytest.mark.parametrize("shell_argv", _SHELLS)
def test_hostile_agent_and_workspace_are_data(tmp_path: Path, shell_argv: list[str]) -> None:
    # Missing, then present: in both cases nothing in them runs and they arrive byte for byte.
    report, _ = run_probe(HOSTILE, HOSTILE, path=SYSTEM_PATH, home=tmp_path, shell_argv=shell_argv)
    assert report.agent_found is False and report.workspace == "missing" and report.os != "Evil"
    name = HOSTILE.replace("/", "_")
    (tmp_path / name).mkdir()
    bin_dir = tmp_path / "bin"
    # Its version line tries to forge a field and carries a terminal escape and a CR.
    _script(bin_dir / name, "printf 'v9=1\\033[31m\\r\\nos=Evil\\n#hostinv-probe end\\n'\n")
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


KERNEL_FILES = (
    "/proc/sys/kernel/ostype",
    "/proc/sys/kernel/osrelease",
    "/proc/sys/kernel/arch",
    "/sys/devices/system/cpu/online",
)


def _hiding_kernel_files() -> list[str]:
    """A prefix that runs the probe in a mount namespace of its own where the kernel files the
    probe reads first read empty: a host where only the tools can answer."""
    unshare, mount = shutil.which("unshare"), shutil.which("mount")
    if os.geteuid() != 0 or not unshare or not mount:
        pytest.skip("hiding /proc and /sys files needs root, unshare and mount")
    hide = (
        f'for f do shift; [ "$f" = -- ] && break; [ ! -e "$f" ] || {mount} --bind /dev/null "$f" || exit 1; done; '
        'exec "$@"'
    )
    return [unshare, "--mount", "--propagation", "private", "/bin/sh", "-c", hide, "hide", *KERNEL_FILES, "--"]


def test_the_kernel_answers_without_a_tool(tmp_path: Path) -> None:
    # No tool at all: /proc and /sys still say what the OS, kernel, arch and cores are.
    empty = tmp_path / "empty"
    empty.mkdir()
    report, _ = run_probe("agent", str(tmp_path), path=str(empty), home=tmp_path, login_shell="")
    uname = os.uname()
    assert (report.os, report.kernel) == (uname.sysname, uname.release)
    assert report.arch == (uname.machine if Path("/proc/sys/kernel/arch").exists() else None)
    assert report.cores == os.cpu_count() and report.cores_from == "online"
    assert report.agent_found is False and report.login == "no_shell"
    assert "disk_free" in report.unavailable and report.workspace == "dir"


def test_a_host_without_getconf_df_or_setsid(tmp_path: Path) -> None:
    # The kernel files read empty and only uname and sleep exist: cores come from /proc/cpuinfo,
    # the OS from uname, free disk is reported unavailable.
    tools = _tool_dir(tmp_path, ["uname", "sleep"])
    bin_dir = tmp_path / "bin"
    _script(bin_dir / "agent", "echo agent 2.0\n")
    report, _ = run_probe(
        "agent", str(tmp_path), path=f"{bin_dir}:{tools}", home=tmp_path, prefix=_hiding_kernel_files()
    )
    uname = os.uname()
    assert (report.os, report.arch, report.kernel) == (uname.sysname, uname.machine, uname.release)
    assert report.cores == os.cpu_count() and report.cores_from == "cpuinfo"
    assert report.disk_free_kib is None and report.unavailable == ("disk_free",)
    assert report.agent_version == "agent 2.0"


def test_a_df_that_hangs_leaves_what_was_read_before_it(tmp_path: Path) -> None:
    # The report is written in a few pieces, not a line at a time; each goes out before a step
    # that may hang (df on a dead NFS mount): a probe cut short by the runner's timeout still
    # says what it read.
    import select
    import signal

    from hostinv.probes import ReportCutShortError

    tools = _tool_dir(tmp_path, ["sleep"])
    df_ran = tmp_path / "df-ran"
    _script(tools / "df", f": >{df_ran}\nexec sleep 60\n")  # a df that hangs
    probe = subprocess.Popen(
        PROBE_COMMAND.split(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PATH": str(tools), "HOME": str(tmp_path)},
        start_new_session=True,
    )
    assert probe.stdin is not None and probe.stdout is not None
    probe.stdin.write(probe_script("agent", str(tmp_path)).encode())
    probe.stdin.close()
    out = b""
    try:
        # Once df runs, everything the probe wrote before it is in the pipe, and nothing more comes.
        wait_for_file(df_ran, within=RUN_TIMEOUT_S)
        while select.select([probe.stdout], [], [], 0)[0] and (piece := os.read(probe.stdout.fileno(), 4096)):
            out += piece
    finally:
        os.killpg(probe.pid, signal.SIGKILL)
    probe.wait()
    probe.stdout.close()
    with pytest.raises(ReportCutShortError) as info:
        parse_report(out.decode())
    partial = info.value.partial
    assert partial.cores == os.cpu_count() and partial.mem_total_kib and partial.workspace_writable is True
    assert partial.disk_free_kib is None and partial.agent_found is None


def test_cores_from_getconf_when_the_kernel_list_is_unreadable(tmp_path: Path) -> None:
    report, _ = run_probe("sh", str(tmp_path), path=SYSTEM_PATH, home=tmp_path, prefix=_hiding_kernel_files())
    assert report.cores == os.cpu_count() and report.cores_from == "getconf"
    assert report.os == os.uname().sysname and report.unavailable == ()


def test_a_host_with_no_tools_at_all(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    report, _ = run_probe(
        "agent", str(tmp_path), path=str(empty), home=tmp_path, login_shell="", prefix=_hiding_kernel_files()
    )
    assert report.os is None and report.arch is None and report.kernel is None
    assert {"os", "arch", "kernel", "disk_free"} <= set(report.unavailable)
    assert report.agent_found is False and report.login == "no_shell"
    assert report.cores == os.cpu_count() and report.cores_from == "cpuinfo"  # /proc/cpuinfo needs no tool
    assert report.workspace == "dir"


def test_an_odd_locale_changes_nothing(tmp_path: Path) -> None:
    odd = {"LC_ALL": "de_DE.UTF-8", "LANG": "tr_TR.UTF-8", "LC_NUMERIC": "fr_FR.UTF-8"}
    report, _ = run_probe("sh", str(tmp_path), path=SYSTEM_PATH, home=tmp_path, extra_env=odd)
    assert report.load is not None and report.cores and report.disk_free_kib
    assert report.garbage_lines == 0 and report.invalid == ()


def test_the_probe_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / ".profile").write_text("PATH=$PATH:/nowhere\n")
    before = sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    run_probe("no-agent", "ws", path=SYSTEM_PATH, home=tmp_path, login_shell="/bin/sh")
    run_probe("sh", "ws", path=SYSTEM_PATH, home=tmp_path)
    assert sorted((str(p), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before


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

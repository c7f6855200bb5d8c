"""What the probe says of the host and the workspace, run for real by local shells: a workspace
that is a file, relative or read-only; the kernel's files or the tools missing (no getconf, df or
setsid, a df that hangs, no tool at all); an odd locale; and that the probe changes nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from hostinv.probes import PROBE_COMMAND, Verdict, judge_report, parse_report, probe_script
from tests.support.probe_run import RUN_TIMEOUT_S, SYSTEM_PATH, hiding_kernel_files, run_probe, tool_dir, write_script
from tests.support.processes import wait_for_file

pytestmark = pytest.mark.process  # every test runs a shell, as sshd's login would


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
    tools = tool_dir(tmp_path, ["uname", "sleep"])
    bin_dir = tmp_path / "bin"
    write_script(bin_dir / "agent", "echo agent 2.0\n")
    report, _ = run_probe(
        "agent", str(tmp_path), path=f"{bin_dir}:{tools}", home=tmp_path, prefix=hiding_kernel_files()
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

    tools = tool_dir(tmp_path, ["sleep"])
    df_ran = tmp_path / "df-ran"
    write_script(tools / "df", f": >{df_ran}\nexec sleep 60\n")  # a df that hangs
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
    report, _ = run_probe("sh", str(tmp_path), path=SYSTEM_PATH, home=tmp_path, prefix=hiding_kernel_files())
    assert report.cores == os.cpu_count() and report.cores_from == "getconf"
    assert report.os == os.uname().sysname and report.unavailable == ()


def test_a_host_with_no_tools_at_all(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    report, _ = run_probe(
        "agent", str(tmp_path), path=str(empty), home=tmp_path, login_shell="", prefix=hiding_kernel_files()
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

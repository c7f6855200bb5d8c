"""Running the host probe (:mod:`hostinv.probes`) for real, as sshd's login would: a local shell
reads the script on stdin, in a small world a test builds (a PATH holding only some tools, a
home with a login profile, the kernel's files hidden), and the report comes back parsed."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from hostinv.probes import PROBE_COMMAND, ProbeReport, parse_report, probe_script

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "KERNEL_FILES",
    "RUN_TIMEOUT_S",
    "SHELLS",
    "SYSTEM_PATH",
    "hiding_kernel_files",
    "run_probe",
    "tool_dir",
    "write_script",
]

RUN_TIMEOUT_S = 60  # generous: a loaded 2-core machine; the probe itself bounds what it runs
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


SHELLS = [
    pytest.param(argv, id=argv[-1] if len(argv) == 1 else "busybox")
    for argv in (["/bin/sh"], ["dash"], ["bash"], ["busybox", "sh"])
    if shutil.which(argv[0])
]


def tool_dir(root: Path, tools: list[str]) -> Path:
    """A directory with links to only ``tools``: a host that lacks the others."""
    bin_dir = root / "tools"
    bin_dir.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return bin_dir


def write_script(path: Path, body: str) -> Path:
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


KERNEL_FILES = (
    "/proc/sys/kernel/ostype",
    "/proc/sys/kernel/osrelease",
    "/proc/sys/kernel/arch",
    "/sys/devices/system/cpu/online",
)


def hiding_kernel_files() -> list[str]:
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

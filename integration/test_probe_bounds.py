"""What a host sends the probe is bounded: real sshd, real users whose login scripts flood or linger.

A login that prints hundreds of megabytes before the probe (on stdout or stderr) costs the
controller no more memory than a quiet one: the probe reads through it within its command
timeout and keeps a bounded tail. A report that never ends is cut at its bound and judged. A
login script that leaves a process holding the channel open does not make the probe wait for
its timeout: it ends at the report's end line. Peak memory is measured in a process of its own
(``ru_maxrss``), against a quiet login probed by the same code.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from hostinv import Host
from hostinv.causes import Cause
from hostinv.probes import ProbeSettings, Verdict, channel, probe_host, runner
from integration.users import SHELLS, throwaway_user

if TYPE_CHECKING:
    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

FLOOD_BYTES = 400_000_000
ROOT = Path(__file__).resolve().parents[1]
# One probe in a process of its own, printing its outcome and its peak resident memory.
CHILD = r"""
import asyncio, json, resource, sys
from hostinv import Host
from hostinv.probes import ProbeSettings, probe_host

args = json.loads(sys.argv[1])
settings = ProbeSettings(ssh_config=args["config"], connect_timeout_s=30, command_timeout_s=args["timeout"])
result = asyncio.run(probe_host(Host(name="lab1", user=args["user"]), "sh", "", settings))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"verdict": result.verdict.value, "cause": result.cause and result.cause.value,
                  "message": result.message, "latency": result.latency_s, "peak_kib": peak}))
"""


async def probe_in_child(lab: SshLab, user: str, timeout_s: float) -> dict[str, Any]:
    args = json.dumps({"config": str(lab.config), "user": user, "timeout": timeout_s})
    with anyio.fail_after(timeout_s + 60):
        done = await anyio.run_process(
            [sys.executable, "-c", CHILD, args], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return dict(json.loads(done.stdout))


def flood(to: str) -> str:
    """A ~/.bashrc (bash reads it for an ssh command) printing FLOOD_BYTES in lines."""
    return f"yes 'a login script that will not stop talking, line after line' | head -c {FLOOD_BYTES} {to}; echo {to}\n"


@pytest.mark.parametrize(
    ("bashrc", "verdict", "cause", "says"),
    [
        (flood(""), Verdict.READY, None, "sh at"),
        (flood(">&2"), Verdict.READY, None, "sh at"),
        # a report header, then a flood and no end line: cut at its bound
        (f"printf '#hostinv-probe 1\\n'; {flood('')}exit 0\n", Verdict.PROBE_FAILED, Cause.PROBE_INCOMPLETE, "64 KiB"),
    ],
    ids=["stdout-before-the-report", "stderr", "report-that-never-ends"],
)
async def test_a_login_that_floods_costs_bounded_memory(
    ssh_lab: SshLab, homes: Path, bashrc: str, verdict: Verdict, cause: Cause | None, says: str
) -> None:
    key = ssh_lab.client_key.with_suffix(".pub")
    with throwaway_user(key, shell=SHELLS["bash"], base=homes) as quiet:
        baseline = await probe_in_child(ssh_lab, quiet.name, 120)
    assert baseline["verdict"] == "ready", baseline
    with throwaway_user(key, shell=SHELLS["bash"], base=homes, dotfiles={".bashrc": bashrc}) as loud:
        got = await probe_in_child(ssh_lab, loud.name, 120)
    assert (got["verdict"], got["cause"]) == (verdict.value, cause and cause.value), got
    assert says in got["message"]
    # The flood is 400 MB; the probe keeps a few hundred KiB of it at most (asyncssh's window
    # included). 32 MiB of slack covers allocator noise.
    assert got["peak_kib"] < baseline["peak_kib"] + 32 * 1024, (got, baseline)


async def test_a_process_left_holding_the_output_does_not_hold_the_probe(ssh_lab: SshLab, homes: Path) -> None:
    # A background process started by ~/.bashrc keeps the channel's stdout and stderr open for
    # as long as it lives; the report's end line is where the probe ends.
    key = ssh_lab.client_key.with_suffix(".pub")
    with throwaway_user(key, shell=SHELLS["bash"], base=homes, dotfiles={".bashrc": "sleep 600 &\n"}) as user:
        settings = ProbeSettings(ssh_config=str(ssh_lab.config), connect_timeout_s=15, command_timeout_s=60)
        with anyio.fail_after(45):
            result = await probe_host(Host(name="lab1", user=user.name), "sh", "", settings)
    assert result.verdict is Verdict.READY, result.message
    assert result.latency_s < 20, result.latency_s


async def test_a_login_whose_last_words_end_without_a_newline_is_still_probed(ssh_lab: SshLab, homes: Path) -> None:
    # The report's first line is then glued to those words; it is still the report.
    key = ssh_lab.client_key.with_suffix(".pub")
    dotfiles = {".bashrc": "printf 'Welcome to the build farm'\n"}
    with throwaway_user(key, shell=SHELLS["bash"], base=homes, dotfiles=dotfiles) as user:
        settings = ProbeSettings(ssh_config=str(ssh_lab.config), connect_timeout_s=15, command_timeout_s=30)
        with anyio.fail_after(45):
            result = await probe_host(Host(name="lab1", user=user.name), "sh", "", settings)
    assert result.verdict is Verdict.READY, result.message


class _LateInput:
    """An asyncssh connection whose commands are handed over only once they have ended: the
    probe's input is then written to a closed channel, as it is when a refusing login shell
    ends before the probe gets to write (a race the probe wins most of the time)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def create_process(self, *args: Any, **kwargs: Any) -> Any:
        process = await self._conn.create_process(*args, **kwargs)
        await process.wait_closed()
        return process


@pytest.mark.parametrize("late", [False, True], ids=["as-it-comes", "ended-before-the-probe-writes"])
async def test_a_login_that_refuses_the_command_says_why_from_its_stderr(
    ssh_lab: SshLab, homes: Path, monkeypatch: pytest.MonkeyPatch, late: bool
) -> None:
    if late:
        monkeypatch.setattr(runner, "read_report", lambda conn, *args: channel.read_report(_LateInput(conn), *args))
    key = ssh_lab.client_key.with_suffix(".pub")
    with throwaway_user(key, shell="/usr/sbin/nologin", base=homes) as user:
        settings = ProbeSettings(ssh_config=str(ssh_lab.config), connect_timeout_s=15, command_timeout_s=30)
        with anyio.fail_after(45):
            result = await probe_host(Host(name="lab1", user=user.name), "sh", "", settings)
    assert (result.verdict, result.cause) == (Verdict.PROBE_FAILED, Cause.LOGIN_REFUSED), result.message
    assert "not available" in result.message

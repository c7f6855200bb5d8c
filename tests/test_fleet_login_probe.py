"""The probe as a session's preflight: what the login printed before the ready marker, judged.

Recorded outputs, as a host's ``/bin/sh`` prints them ahead of the marker (login noise first),
go through :meth:`LoginProbe.admit`: a ready host lets the agent start, any other verdict refuses
the go-ahead with an error of the session vocabulary and keeps the probe's result for the check.
The script itself is the one ``hostinv`` runs over asyncssh (tested by its own runs), less the
agent's ``--version``, which the handshake's ``initialize`` answers.
"""

from __future__ import annotations

import subprocess

import pytest

from hostinv import Host
from hostinv.probes import REPORT_END, REPORT_HEADER, Verdict
from remote_acp import ErrorKind
from remote_acp.fleet.login_probe import PROBE_MARGIN_S, LoginProbe

BASE = [
    "os=Linux",
    "arch=x86_64",
    "kernel=6.1.0",
    "cores=4",
    "load=0.50 0.40 0.30",
    "mem_total_kib=8000000",
    "mem_available_kib=4000000",
    "workspace=dir",
    "workspace_writable=yes",
    "disk_free_kib=1000000",
    "path=/usr/bin:/bin",
    "shell=/bin/bash",
]
FOUND = ["agent=found", "agent_path=/usr/local/bin/agent", "agent_run=skipped"]


def printed(*lines: str, noise: str = "Welcome to build-7\n") -> bytes:
    return (noise + "\n".join([REPORT_HEADER, *lines, "unavailable=", REPORT_END]) + "\n").encode()


def probe(capacity: int = 2, slot_prefix: str = "/tmp/slots-") -> LoginProbe:
    return LoginProbe(Host(name="build-7", capacity=capacity), "agent", "/srv/ws", slot_prefix=slot_prefix)


def test_a_ready_host_lets_the_agent_start_and_keeps_the_facts() -> None:
    login = probe()
    assert login.admit(printed(*BASE, *FOUND, "slots_held=1")) is None
    result = login.result
    assert result is not None and result.verdict is Verdict.READY
    assert result.report is not None and result.report.cores == 4 and result.report.slots_held == 1
    assert result.report.agent_exit is None and result.report.agent_version is None
    assert "agent at /usr/local/bin/agent" in result.message


@pytest.mark.parametrize(
    ("lines", "verdict", "kind", "words"),
    [
        (
            [*BASE, "agent=missing", "login=found", "login_dir=/opt/agent/bin", "login_path=/opt/agent/bin:/usr/bin"],
            Verdict.AGENT_NOT_FOUND,
            ErrorKind.AGENT_NOT_FOUND,
            "/opt/agent/bin",
        ),
        (
            [*(line for line in BASE if not line.startswith("workspace")), "workspace=missing", *FOUND],
            Verdict.WORKSPACE_INVALID,
            ErrorKind.INVALID_WORKSPACE_CWD,
            "/srv/ws",
        ),
        ([*BASE, *FOUND, "slots_held=2"], Verdict.AT_CAPACITY, ErrorKind.PORT_EXIT, "its capacity is 2"),
    ],
)
def test_a_host_that_is_not_ready_refuses_the_go_ahead(
    lines: list[str], verdict: Verdict, kind: ErrorKind, words: str
) -> None:
    login = probe()
    refusal = login.admit(printed(*lines))
    assert login.result is not None and login.result.verdict is verdict, login.result
    assert refusal is not None and refusal.kind is kind and refusal.cause is login.result.cause
    # A full host frees a slot on its own; every other refusal needs a change on the host.
    assert refusal.retryable is (verdict is Verdict.AT_CAPACITY)
    assert refusal.message == f"the host's probe found it not ready: {login.result.message}"
    assert words in login.result.message + (login.result.fix or "")


@pytest.mark.parametrize(
    "output",
    [
        b"",
        b"Welcome\nno report at all\n",
        printed(*BASE)[: -len(REPORT_END) - 20],  # cut short
        b"\xff\xfe" * 5000,  # not text
    ],
    ids=["nothing", "no-report", "cut-short", "binary"],
)
def test_output_without_a_whole_report_is_probe_failed(output: bytes) -> None:
    login = probe()
    refusal = login.admit(output)
    assert login.result is not None and login.result.verdict is Verdict.PROBE_FAILED
    assert login.result.report is None and login.result.fix
    assert refusal is not None and refusal.kind is ErrorKind.PORT_EXIT


def test_slots_are_judged_only_when_the_probe_asks_for_them() -> None:
    # Without a slot prefix the host's capacity is not the check's business (none is counted).
    login = probe(slot_prefix="")
    assert login.admit(printed(*BASE, *FOUND, "slots_held=5")) is None
    assert login.result is not None and login.result.verdict is Verdict.READY


def test_the_script_skips_the_version_and_its_bound_covers_what_it_runs() -> None:
    login = LoginProbe(Host(name="h"), "agent", "/w", version_timeout_s=4, login_timeout_s=6)
    assert login.bound_ms == (4 + 6 + PROBE_MARGIN_S) * 1000
    assert login.script.isascii()
    # The data line decodes to the settings: no --version run, the login lookup on.
    data = login.script.split("\n", 1)[0].split("=", 1)[1].strip("'")
    decoded = subprocess.run(["printf", "%b", data], capture_output=True, check=True).stdout.decode()
    assert "_hp_ver=\n" in decoded and "_hp_login=1\n" in decoded and "_hp_prog=agent\n" in decoded

"""The report parser, on outputs recorded from real shells and on hostile ones written by hand.

Recorded (``tests/fixtures/probes/``, paths rewritten to neutral ones): a ready Linux host, BusyBox
with only ``uname`` and ``sleep``, an agent only a zsh login finds, an agent whose ``--version``
hangs, a probe cut short. Written: a hostile report (a dotfile's fake report before the real one,
forged keys, escapes, garbage, an overlong value), a macOS host, a read-only NFS workspace with an
agent whose interpreter is missing, a nologin shell, a report of a later version.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hostinv.probes import (
    NoReportError,
    ProbeReport,
    ReportCutShortError,
    UnsupportedReportError,
    parse_report,
)
from hostinv.probes.command import MAX_VALUE_CHARS

FIXTURES = Path(__file__).parent / "fixtures" / "probes"


def fixture(name: str) -> str:
    # As the runner will: bytes from the channel, decoded without ever failing.
    return (FIXTURES / name).read_bytes().decode("utf-8", errors="replace")


def test_a_ready_linux_host() -> None:
    report = parse_report(fixture("linux_ready.txt"))
    assert report.os == "Linux" and report.arch == "x86_64" and report.kernel
    assert report.cores == 2 and report.cores_from == "getconf"
    assert report.load is not None and len(report.load) == 3 and report.load_from == "loadavg"
    assert report.mem_total_kib and report.mem_available_kib and report.disk_free_kib
    assert report.workspace == "dir" and report.workspace_writable is True
    assert report.agent_found is True and report.agent_path == "/home/build/.local/bin/qwen"
    assert report.agent_exit == 0 and report.agent_version == "qwen-code 0.0.14"
    assert report.login is None and report.unavailable == ()
    assert report.garbage_lines == 0 and report.invalid == ()
    assert report.load_per_core == pytest.approx(report.load[0] / 2)


def test_busybox_with_few_tools() -> None:
    report = parse_report(fixture("busybox_few_tools.txt"))
    assert report.cores_from == "cpuinfo" and report.cores == 2
    assert report.disk_free_kib is None and report.unavailable == ("disk_free",)


def test_an_agent_only_a_login_shell_finds() -> None:
    report = parse_report(fixture("login_only_zsh.txt"))
    assert report.agent_found is False and report.agent_path is None
    assert report.login == "found" and report.login_dir == "/opt/agent/bin"
    assert report.shell == "/usr/bin/zsh"


def test_an_agent_whose_version_timed_out() -> None:
    report = parse_report(fixture("version_timeout.txt"))
    assert report.agent_timed_out is True and report.agent_exit is None and report.agent_version is None
    assert report.workspace == "missing" and report.workspace_writable is None and report.disk_free_kib is None


def test_a_probe_cut_short_keeps_what_came() -> None:
    with pytest.raises(ReportCutShortError) as caught:
        parse_report(fixture("cut_short.txt"))
    partial = caught.value.partial
    assert partial.os == "Linux" and partial.disk_free_kib
    assert partial.agent_found is None  # never arrived: unknown, not missing


def test_a_cut_short_report_is_a_report_error_of_its_own() -> None:
    text = fixture("linux_ready.txt")
    parse_report(text)
    with pytest.raises(ReportCutShortError):
        parse_report(text.replace("#hostinv-probe end\n", ""))


def test_a_hostile_report() -> None:
    report = parse_report(fixture("hostile.txt"))
    # The dotfile's fake report before the real header is not read.
    assert report.agent_version is not None and "forged" not in report.agent_version
    assert report.os == "Linux"  # the first of two stands
    assert report.arch == "x86_64"  # the transport's CR is not part of the value
    assert report.cores is None and report.mem_total_kib is None and report.disk_free_kib is None
    assert report.workspace_writable is None
    assert set(report.invalid) == {"cores", "mem_total_kib", "disk_free_kib", "workspace_writable"}
    assert report.load == (0.5, 0.4, 0.3)
    # An escaped newline stays inside its value, masked; an escaped backslash is one backslash.
    assert report.path == "/usr/bin:/weird\ufffdos=Evil:/back\\slash"
    # Terminal escapes are masked and the value is bounded.
    assert "\x1b" not in report.agent_version and "\x07" not in report.agent_version
    assert report.agent_version.startswith("qwen \ufffd]0;pwned\ufffd AAA")
    assert len(report.agent_version) == MAX_VALUE_CHARS
    # No equals sign, an empty key, a key that is no key, binary junk: garbage, counted. A key of
    # a later probe is not garbage, and not read.
    assert report.garbage_lines == 4
    assert report.unavailable == ("disk_free", "mem_available")


def test_a_macos_host() -> None:
    report = parse_report(fixture("macos.txt"))
    assert report.os == "Darwin" and report.arch == "arm64" and report.cores == 10
    assert report.load == (1.52, 1.61, 1.70) and report.load_from == "uptime"
    assert report.mem_total_kib is None and report.unavailable == ("mem_available", "mem_total")


def test_a_read_only_workspace_and_a_broken_agent() -> None:
    report = parse_report(fixture("nfs_workspace_readonly.txt"))
    assert report.workspace_writable is False and report.disk_free_kib == 0
    assert report.agent_exit == 127 and report.agent_version and "node" in report.agent_version
    assert report.load_per_core == pytest.approx(70.1 / 64)


def test_no_report_at_all() -> None:
    with pytest.raises(NoReportError) as caught:
        parse_report(fixture("nologin.txt"))
    assert "currently not available" in caught.value.output_tail
    with pytest.raises(NoReportError):
        parse_report("")


def test_a_report_of_a_later_version() -> None:
    with pytest.raises(UnsupportedReportError, match="'2'"):
        parse_report(fixture("future_version.txt"))


def test_crlf_line_ends_from_the_transport() -> None:
    report = parse_report(fixture("linux_ready.txt").replace("\n", "\r\n"))
    assert report.os == "Linux" and report.agent_version == "qwen-code 0.0.14" and report.garbage_lines == 0


def test_other_line_separators_do_not_split() -> None:
    # Python's splitlines would split on these; the report splits on \n only.
    text = "#hostinv-probe 1\nos=Li\x0bnux\u2028agent=found\x1cx\n#hostinv-probe end\n"
    report = parse_report(text)
    assert report.os == "Li\ufffdnux\ufffdagent=found\ufffdx" and report.agent_found is None


def test_an_empty_report_is_all_unknown() -> None:
    assert parse_report("#hostinv-probe 1\n#hostinv-probe end\n") == ProbeReport()

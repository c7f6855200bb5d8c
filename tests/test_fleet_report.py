"""One result per host: the JSON object's keys, the table's cells, the command's exit status, and
probes kept in the cache with their age."""

from __future__ import annotations

import io
import json
import time
from typing import TYPE_CHECKING

import pytest

from hostinv import Host
from hostinv.probes import HostProbe, ProbeReport, Verdict
from hostinv.probes.verdicts import VERDICT_CAUSE
from remote_acp.cli.check import render_json, render_table
from remote_acp.fleet import (
    EXIT_SOME_NOT_READY,
    EXIT_SOME_UNREACHABLE,
    HandshakeFacts,
    HostCheck,
    detail_lines,
    exit_status,
    table_rows,
)
from remote_acp.fleet.cache import ProbeCache

if TYPE_CHECKING:
    from pathlib import Path

KEYS = [
    "type", "host", "destination", "verdict", "ready", "message", "fix", "error_kind", "cause", "retryable",
    "latency_ms", "probe_age_s", "handshake", "os", "arch", "kernel", "cores", "load",
    "mem_available_kib", "disk_free_kib", "capacity", "slots_held", "agent_path", "agent_name", "agent_version",
    "auth_required",
]  # fmt: skip
REPORT = ProbeReport(
    os="Linux",
    arch="x86_64",
    kernel="6.1.0",
    cores=8,
    load=(0.5, 0.25, 0.125),
    disk_free_kib=1000,
    workspace="dir",
    workspace_writable=True,
    agent_found=True,
    agent_path="/usr/bin/qwen",
    agent_exit=0,
    agent_version="0.9.1",
    unavailable=("mem",),
    slots_held=1,
)
HOST = Host(name="build-1", address="10.0.0.5", user="ci", port=2222, groups=("build",), capacity=4)


def ready(name: str = "build-1") -> HostCheck:
    return HostCheck(
        HOST.replace(name=name),
        Verdict.READY,
        "qwen 0.9.1 answered initialize and opened a session",
        latency_s=0.25,
        report=REPORT,
        handshake=HandshakeFacts("qwen", "0.9.2", auth_required=True),
    )


def failed(verdict: Verdict, name: str) -> HostCheck:
    return HostCheck(
        Host(name=name),
        verdict,
        f"{verdict} on {name}",
        fix="do this",
        error_kind="port_exit",
        cause=VERDICT_CAUSE.get(verdict),
    )


def test_every_key_is_present_in_a_stable_order() -> None:
    obj = json.loads(render_json([ready()]))
    assert list(obj) == KEYS
    assert obj["destination"] == "ci@10.0.0.5:2222"
    assert obj["verdict"] == "ready" and obj["ready"] is True
    assert obj["load"] == [0.5, 0.25, 0.125] and obj["cores"] == 8 and obj["latency_ms"] == 250
    assert obj["agent_version"] == "0.9.2"  # the handshake's agentInfo wins over --version
    assert obj["agent_name"] == "qwen" and obj["auth_required"] is True and obj["handshake"] is True
    bare = json.loads(render_json([failed(Verdict.UNREACHABLE, "down")]))
    assert list(bare) == KEYS
    assert bare["os"] is None and bare["agent_version"] is None and bare["handshake"] is False
    assert bare["error_kind"] == "port_exit" and bare["fix"] == "do this"
    assert (bare["cause"], bare["retryable"]) == ("connect_failed", True)
    assert (obj["cause"], obj["retryable"]) == (None, None)


def test_json_is_one_ascii_line_per_host_in_the_order_given() -> None:
    checks = [ready("b"), failed(Verdict.AUTH_FAILED, "bâtiment-é")]
    text = render_json(checks)
    assert text.isascii()
    assert [json.loads(line)["host"] for line in text.splitlines()] == ["b", "bâtiment-é"]


def test_the_probe_version_stands_in_when_there_was_no_handshake() -> None:
    check = HostCheck(HOST, Verdict.READY, "ready", report=REPORT)
    assert check.agent_version == "0.9.1"
    failing = HostCheck(HOST, Verdict.READY, "ready", report=ProbeReport(agent_exit=2, agent_version="usage: x"))
    assert failing.agent_version is None  # an error message is no version


def test_the_table_has_one_row_per_host_with_the_facts() -> None:
    rows = table_rows([ready(), failed(Verdict.AGENT_NOT_FOUND, "b2")])
    assert rows[0] == ("build-1", "ready", "250 ms", "Linux/x86_64", "8", "0.50", "1/4", "qwen 0.9.2")
    assert rows[1] == ("b2", "agent_not_found", "0 ms", "", "", "", "", "")
    cached = HostCheck(HOST, Verdict.READY, "ready", latency_s=0.1, probe_age_s=42.4)
    assert table_rows([cached])[0][2] == "100 ms (cached 42s)"


def test_the_reason_and_fix_of_each_host_not_ready_follow_whole() -> None:
    long_fix = "ssh-keygen -f /home/u/.ssh/known_hosts -R '[build-7.example.internal]:2222' " + "x" * 200
    check = HostCheck(Host(name="b2"), Verdict.HOST_KEY_CHANGED, "the key changed", fix=long_fix)
    assert detail_lines([ready(), check]) == ["b2 (host_key_changed): the key changed", f"  fix: {long_fix}"]


def test_what_a_host_or_agent_wrote_reaches_no_terminal_as_control() -> None:
    hostile = "\x1b]0;pwned\x07\x1b[2J\rready  forged row"
    shake = HandshakeFacts(hostile, "1.0\x1b[31m", auth_required=False)
    check = HostCheck(Host(name="b"), Verdict.AGENT_FAILED, hostile, fix=hostile, handshake=shake)
    text = "".join(table_rows([check])[0]) + "".join(detail_lines([check]))
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    assert "\\x1b]0;pwned" in text


def test_the_rendered_table_shows_markup_as_text() -> None:
    from rich.console import Console

    console = Console(width=400, record=True, file=io.StringIO())
    console.print(render_table([failed(Verdict.PROBE_FAILED, "[bold]x")]))
    assert "[bold]x" in console.export_text()


@pytest.mark.parametrize(
    ("verdicts", "status"),
    [
        ([Verdict.READY, Verdict.READY], 0),
        ([Verdict.READY, Verdict.UNREACHABLE, Verdict.HOST_KEY_CHANGED], EXIT_SOME_UNREACHABLE),
        ([Verdict.AUTH_FAILED, Verdict.HOST_KEY_UNKNOWN], EXIT_SOME_UNREACHABLE),
        ([Verdict.READY, Verdict.CREDENTIAL_UNVERIFIED], EXIT_SOME_NOT_READY),
        ([Verdict.UNREACHABLE, Verdict.AGENT_NOT_FOUND], EXIT_SOME_NOT_READY),
        ([Verdict.AT_CAPACITY], EXIT_SOME_NOT_READY),
    ],
)
def test_exit_status(verdicts: list[Verdict], status: int) -> None:
    assert exit_status([failed(v, f"h{i}") for i, v in enumerate(verdicts)]) == status


def test_a_probe_is_reused_only_while_fresh(tmp_path: Path) -> None:
    cache = ProbeCache(tmp_path / "probes", context="settings-1")
    probe = HostProbe(HOST, Verdict.READY, "ready", None, REPORT, 0.5)
    cache.put(probe, "qwen", "/w")
    hit = cache.get(HOST, "qwen", "/w", max_age_s=60)
    assert hit is not None and hit.probe == probe  # read back as it was kept
    assert 0 <= hit.age_s < 60
    assert cache.get(HOST, "qwen", "/w", max_age_s=0) is None  # the default: no reuse
    assert cache.get(HOST, "claude", "/w", max_age_s=60) is None
    assert cache.get(HOST, "qwen", "/other", max_age_s=60) is None
    assert cache.get(HOST.replace(port=22), "qwen", "/w", max_age_s=60) is None
    assert ProbeCache(tmp_path / "probes", context="settings-2").get(HOST, "qwen", "/w", max_age_s=60) is None
    (entry,) = (tmp_path / "probes").glob("probe-*.json")
    data = json.loads(entry.read_text())
    data["at"] = time.time() - 120
    entry.write_text(json.dumps(data))
    assert cache.get(HOST, "qwen", "/w", max_age_s=60) is None
    found = cache.get(HOST, "qwen", "/w", max_age_s=600)
    assert found is not None and 119 < found.age_s < 600
    entry.write_text("{torn")
    assert cache.get(HOST, "qwen", "/w", max_age_s=600) is None


def test_the_cache_lives_under_the_cache_directory_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path))
    assert ProbeCache().directory == tmp_path / "probes"

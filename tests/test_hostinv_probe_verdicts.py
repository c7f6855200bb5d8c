"""The verdict taxonomy as data, and the probe's share of judging a host."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostinv.probes import (
    CONNECTION_VERDICTS,
    MEANING,
    SEED_READINESS,
    NoReportError,
    ProbeReport,
    ReportCutShortError,
    Verdict,
    judge_probe_error,
    judge_report,
    parse_report,
)

FIXTURES = Path(__file__).parent / "fixtures" / "probes"


def fixture(name: str) -> ProbeReport:
    return parse_report((FIXTURES / name).read_bytes().decode("utf-8", errors="replace"))


def test_every_verdict_has_a_meaning_and_stable_values() -> None:
    assert set(MEANING) == set(Verdict)
    assert all(len(text) > 40 for text in MEANING.values())
    assert [v.value for v in Verdict] == [
        "ready",
        "unreachable",
        "auth_failed",
        "host_key_unknown",
        "host_key_changed",
        "agent_not_found",
        "workspace_invalid",
        "agent_failed",
        "handshake_timeout",
        "incompatible_protocol",
        "credential_unverified",
        "probe_failed",
        "at_capacity",
    ]


def test_the_seed_readiness_reasons_map_onto_the_vocabulary() -> None:
    assert set(SEED_READINESS) == {
        "missing_binary",
        "spawn_error",
        "handshake_timeout",
        "incompatible_protocol",
        "unauthenticated",
    }
    assert SEED_READINESS["unauthenticated"] is Verdict.CREDENTIAL_UNVERIFIED
    assert Verdict.READY not in CONNECTION_VERDICTS and Verdict.UNREACHABLE in CONNECTION_VERDICTS


def test_ready() -> None:
    judgement = judge_report(fixture("linux_ready.txt"), "qwen", "/home/build/ws")
    assert judgement.ready and judgement.fix is None
    assert "qwen-code 0.0.14" in judgement.message and "Linux x86_64" in judgement.message


def test_found_only_by_a_login_shell_names_the_directory() -> None:
    judgement = judge_report(fixture("login_only_zsh.txt"), "late", "ws")
    assert judgement.verdict is Verdict.AGENT_NOT_FOUND
    assert "/opt/agent/bin" in judgement.message
    assert judgement.fix is not None
    assert "add /opt/agent/bin to PATH in ~/.zshenv" in judgement.fix and "/opt/agent/bin/late" in judgement.fix


def test_found_nowhere() -> None:
    report = ProbeReport(agent_found=False, login="missing", path="/usr/bin:/bin", workspace="dir")
    judgement = judge_report(report, "qwen", "ws")
    assert judgement.verdict is Verdict.AGENT_NOT_FOUND
    assert "/usr/bin:/bin" in judgement.message and "login shell" in judgement.message
    assert judgement.fix and "install" in judgement.fix


@pytest.mark.parametrize(
    ("state", "writable", "words"),
    [("missing", None, "does not exist"), ("not_dir", None, "not a directory"), ("dir", False, "not writable")],
)
def test_workspace_invalid(state: str, writable: bool | None, words: str) -> None:
    report = ProbeReport(workspace=state, workspace_writable=writable, agent_found=True)  # type: ignore[arg-type]
    judgement = judge_report(report, "qwen", "/srv/it's here")
    assert judgement.verdict is Verdict.WORKSPACE_INVALID and words in judgement.message
    assert judgement.fix


def test_the_missing_workspace_fix_quotes_it() -> None:
    judgement = judge_report(ProbeReport(workspace="missing"), "qwen", "/srv/it's here")
    assert judgement.fix and "mkdir -p -- '/srv/it'\"'\"'s here'" in judgement.fix


def test_an_agent_that_cannot_start() -> None:
    judgement = judge_report(fixture("nfs_workspace_readonly.txt"), "qwen", "/nfs/ws")
    # The workspace comes first (a session enters it before it starts the agent); both are named.
    assert judgement.verdict is Verdict.WORKSPACE_INVALID
    assert "agent_failed" in judgement.message and "node" in judgement.message
    report = ProbeReport(workspace="dir", workspace_writable=True, agent_found=True, agent_exit=127)
    assert judge_report(report, "qwen").verdict is Verdict.AGENT_FAILED


def test_a_slow_version_is_not_a_failure() -> None:
    report = ProbeReport(workspace="unset", agent_found=True, agent_timed_out=True, agent_path="/x/qwen")
    judgement = judge_report(report, "qwen")
    assert judgement.ready and "did not answer in time" in judgement.message


def test_probe_failed() -> None:
    judgement = judge_probe_error(NoReportError("the probe printed no report", "This account is not available."))
    assert judgement.verdict is Verdict.PROBE_FAILED and "not available" in judgement.message
    assert judgement.fix and "nologin" in judgement.fix
    cut = judge_probe_error(ReportCutShortError("cut short", "", ProbeReport()))
    assert cut.verdict is Verdict.PROBE_FAILED and cut.fix and "retry" in cut.fix

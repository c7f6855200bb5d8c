"""The probe asks the user's login shell for an agent the plain PATH lacks, as ``ssh host`` would
find it: each login shell with its own dotfiles, the lookup turned off, a login that hangs or runs
nothing. Run for real by local shells, as in test_hostinv_probe_run."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest

from hostinv.probes import Verdict, judge_report
from tests.support.probe_run import SYSTEM_PATH, run_probe, write_script

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.process  # every test runs a shell, as sshd's login would


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
    write_script(agent_dir / "late-agent", "echo late 0.1\n")
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
    write_script(tmp_path / "late-agent", "echo late\n")
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

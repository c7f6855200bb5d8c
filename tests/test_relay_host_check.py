"""The host check and the start step's refusal, run under dash, bash and BusyBox ash against a
logind of the test's own (a ``loginctl`` on the PATH answering as told, a cgroup file naming a
session scope, a runtime directory under a ``/run/user`` of the test's): a sessions' directory in
a runtime directory that goes at the user's last logout is refused, naming the fix."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from remote_acp.targets.ssh.relay.attach import REFUSED_MARK
from remote_acp.targets.ssh.relay.host_check import NO_WINDOW_MARK, host_check_script, parse_host_check
from remote_acp.targets.ssh.relay.start import EXIT_NO_WINDOW, start_script
from tests.support.relay_host import SHELLS, shell_env

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.process

LOGINCTL = """#!/bin/sh
case $1 in
  show-session) printf 'KillUserProcesses=no\\nKillExcludeUsers=root\\nStopIdleSessionSec=infinity\\n' ;;
  show-user) echo "Linger=$RA_TEST_LINGER" ;;
  *) exit 1 ;;
esac
"""


@pytest.fixture(params=SHELLS)
def shell(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    return shell_env(request.param, tmp_path)


class Host:
    """A login in a logind session scope, its runtime directory under ``run_user``."""

    def __init__(self, tmp_path: Path, shell: tuple[list[str], dict[str, str]]) -> None:
        self.sh, env = shell
        fake = tmp_path / "fakebin"
        fake.mkdir()
        (fake / "loginctl").write_text(LOGINCTL)
        (fake / "loginctl").chmod(0o755)
        self.cgroup = tmp_path / "cgroup"
        self.cgroup.write_text("0::/user.slice/user-1000.slice/session-7.scope\n")
        self.run_user = tmp_path / "run"
        self.runtime = self.run_user / str(os.getuid())
        self.runtime.mkdir(parents=True, mode=0o700)
        self.env = {k: v for k, v in env.items() if k != "XDG_RUNTIME_DIR"}
        self.env["PATH"] = f"{fake}:{env['PATH']}"
        self.check = host_check_script(cgroup_file=str(self.cgroup), run_user=str(self.run_user))

    def fields(self, *base: str, linger: str = "no", check: str | None = None) -> dict[str, str]:
        done = subprocess.run(
            [*self.sh, "-c", self.check if check is None else check, "ra-check", *base],
            capture_output=True,
            text=True,
            env={**self.env, "RA_TEST_LINGER": linger},
            check=True,
            timeout=15,
        )
        return parse_host_check(done.stdout.strip())


def test_a_sessions_directory_in_a_runtime_directory_gone_at_logout_is_refused_with_the_fix(
    tmp_path: Path, shell: tuple[list[str], dict[str, str]]
) -> None:
    host = Host(tmp_path, shell)
    user = pwd.getpwuid(os.getuid()).pw_name
    for base in ([], [str(host.runtime / "remote-acp-slots")]):
        fields = host.fields(*base)
        assert (fields["verdict"], fields["runtime_kept"], fields["in_runtime"]) == ("refuse", "no", "yes")
        assert fields["reason"].endswith(f"loginctl enable-linger {user}")
        assert str(host.runtime) in fields["reason"]
    # a user who lingers keeps it; a directory elsewhere is not affected
    assert host.fields(linger="yes")["verdict"] == "ok"
    elsewhere = host.fields(str(tmp_path / "slots-0"))
    assert (elsewhere["verdict"], elsewhere["in_runtime"]) == ("ok", "no")


def test_the_start_step_refuses_it_and_starts_nothing(tmp_path: Path, shell: tuple[list[str], dict[str, str]]) -> None:
    host = Host(tmp_path, shell)
    base = host.runtime / "remote-acp-slots"
    ran = tmp_path / "ran"
    script = start_script(str(base), window_s=5, shell=" ".join(host.sh), host_check=host.check)
    done = subprocess.run(
        [*host.sh, "-c", script, "ra-start", sys.executable, "-c", f"open({str(ran)!r}, 'w')"],
        input=b"abc123 secret\n",
        capture_output=True,
        env={**host.env, "RA_TEST_LINGER": "no"},
        timeout=15,
    )
    assert done.returncode == EXIT_NO_WINDOW
    assert done.stdout.decode() == f"{REFUSED_MARK} no reattach window on this host\n"
    err = done.stderr.decode()
    assert err.startswith(NO_WINDOW_MARK) and "loginctl enable-linger" in err
    assert not list(base.glob("s-*")) and not ran.exists()


def test_the_verdict_only_check_skips_logind_outside_a_session_and_is_the_full_check_inside(
    tmp_path: Path, shell: tuple[list[str], dict[str, str]]
) -> None:
    host = Host(tmp_path, shell)
    # a loginctl that leaves a mark: outside a session it is never asked
    asked = tmp_path / "asked"
    loginctl = tmp_path / "fakebin" / "loginctl"
    loginctl.write_text(LOGINCTL.replace("case $1", f": >{asked}\ncase $1"))
    inside = host_check_script(cgroup_file=str(host.cgroup), run_user=str(host.run_user), verdict_only=True)
    assert host.fields(check=inside) == host.fields()
    assert host.fields()["verdict"] == "refuse"
    asked.unlink()
    outside = tmp_path / "cgroup-none"
    outside.write_text("0::/user.slice/user-1000.slice/user@1000.service/app.slice\n")
    quick = host_check_script(cgroup_file=str(outside), run_user=str(host.run_user), verdict_only=True)
    assert host.fields(check=quick) == {"verdict": "ok", "logind": "no", "scope": "none"}
    assert not asked.exists()
    full = host_check_script(cgroup_file=str(outside), run_user=str(host.run_user))
    fields = host.fields(check=full)
    assert (fields["verdict"], fields["logind"], fields["kill"]) == ("ok", "no", "no") and asked.exists()

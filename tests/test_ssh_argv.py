"""The local ssh argv, as data."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp.targets.ssh import argv as ssh_argv_module
from remote_acp.targets.ssh.argv import PROBED_OVERRIDES, local_ssh_options, ready_bound_ms, session_overrides, ssh_argv
from remote_acp.targets.ssh.config import write_fallback_config
from remote_acp.targets.ssh.destination import Destination
from remote_acp.targets.ssh.settings import HostKeyPolicy, SshSettings
from tests.support.ssh_build import (
    BASE_OPTIONS,
    CONTROL_OPTIONS,
    RUN_TIMEOUT_S,
    session_config_text,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

# What a user's ssh_config may not change about a session, overridden on the command line.
OVERRIDES = [
    "-o", "PermitLocalCommand=no",
    "-o", "ClearAllForwardings=yes",
    "-o", "ConnectionAttempts=1",
    "-o", "VisualHostKey=no",
    "-o", "RemoteCommand=none",
    "-o", "StdinNull=no",
    "-o", "SessionType=default",
    "-o", "ForkAfterAuthentication=no",
]  # fmt: skip

# -- ssh_argv -----------------------------------------------------------------------------------


def test_ssh_argv_default_settings_give_the_fallback_config_and_no_policy_option() -> None:
    config = "/home/u/.cache/remote-acp/ssh/config-0123"
    argv = ssh_argv("/usr/bin/ssh", Destination("build"), SshSettings(), "echo hi", config=config)
    assert argv == [
        "/usr/bin/ssh",
        "-F", "/home/u/.cache/remote-acp/ssh/config-0123",
        "-T",
        "-e", "none",
        "-x",
        "-a",
        "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=VERBOSE",
        *CONTROL_OPTIONS,
        *OVERRIDES,
        "--", "build", "exec /bin/sh -c 'echo hi'",
    ]  # fmt: skip
    assert not any("StrictHostKeyChecking" in word for word in argv)  # the config's fallback decides


def test_ssh_argv_without_a_config_passes_no_file() -> None:
    argv = ssh_argv("ssh", Destination("build"), SshSettings(), "echo hi", config=None)
    assert argv == [
        "ssh",
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=VERBOSE",
        *CONTROL_OPTIONS,
        *OVERRIDES,
        "--", "build", "exec /bin/sh -c 'echo hi'",
    ]  # fmt: skip


def test_ssh_argv_with_config_file_port_timeouts_and_policy_yes() -> None:
    settings = SshSettings(
        host_key_policy="yes",
        config_file="/etc/remote acp/ssh_config",
        connect_timeout_s=3,
        server_alive_interval_s=5,
        server_alive_count_max=2,
    )
    argv = ssh_argv("/opt/ssh", Destination("user@::1", 2201), settings, "true", config=settings.config_file)
    assert argv == [
        "/opt/ssh",
        "-F", "/etc/remote acp/ssh_config",
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=3",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=2",
        "-o", "LogLevel=VERBOSE",
        *CONTROL_OPTIONS,
        *OVERRIDES,
        "-o", "StrictHostKeyChecking=yes",
        "-p", "2201",
        "--", "user@::1", "exec /bin/sh -c true",
    ]  # fmt: skip


def test_ssh_argv_explicit_accept_new_stays_off_the_command_line() -> None:
    # Only the generated config's fallback: a config that says yes or ask for the host wins.
    argv = ssh_argv("ssh", Destination("build"), SshSettings(host_key_policy="accept-new"), "x", config=None)
    assert argv == [
        "ssh",
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=3",
        "-o", "LogLevel=VERBOSE",
        *CONTROL_OPTIONS,
        *OVERRIDES,
        "--", "build", "exec /bin/sh -c x",
    ]  # fmt: skip


def test_ssh_argv_forced_no_policy_and_port_without_config() -> None:
    settings = SshSettings(host_key_policy="no", force_insecure_host_keys=True, server_alive_count_max=1)
    argv = ssh_argv("ssh", Destination("build", 22), settings, "x", config=None)
    assert argv == [
        "ssh",
        *BASE_OPTIONS,
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=15",
        "-o", "ServerAliveCountMax=1",
        "-o", "LogLevel=VERBOSE",
        *CONTROL_OPTIONS,
        *OVERRIDES,
        "-o", "StrictHostKeyChecking=no",
        "-p", "22",
        "--", "build", "exec /bin/sh -c x",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "remote",
    ["echo hi", "it's a 'test'", 'a "b" $c `d` $(e); f && g', "line1\nline2\n", "", "-n", "\\ *", "ünï"],
)
def test_ssh_argv_remote_command_is_one_word_exec_sh_c(remote: str) -> None:
    argv = ssh_argv("ssh", Destination("build", 2222), SshSettings(), remote, config="/c")
    # `--` comes immediately before the destination, which is followed by the one remote word.
    assert argv[-3:-1] == ["--", "build"]
    assert argv.count("--") == 1
    assert argv[-1].startswith("exec /bin/sh -c ")
    assert shlex.split(argv[-1]) == ["exec", "/bin/sh", "-c", remote]


def test_ssh_argv_remote_word_runs_the_script_through_a_login_shell() -> None:
    # The far side's login shell runs `$SHELL -c WORD`; the word must hand the script over intact.
    script = "printf '%s|' \"$0\" 'it'\"'\"'s' \"$HOME\" '$HOME'"
    argv = ssh_argv("ssh", Destination("build"), SshSettings(), script, config=None)
    env = {**os.environ, "HOME": "/home/h"}
    done = subprocess.run(["sh", "-c", argv[-1]], capture_output=True, env=env, timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"/bin/sh|it's|/home/h|$HOME|"


# -- no connection sharing ----------------------------------------------------------------------

SHARING_CONFIG = "Host *\n  ControlMaster auto\n  ControlPath {dir}/cm-%C\n  ControlPersist 600\n"


def ssh_g(argv: list[str]) -> dict[str, str]:
    """What ``ssh -G`` says the argv would use (ssh reads its config and connects nowhere)."""
    done = subprocess.run(
        [argv[0], "-G", *argv[1:]], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, done.stderr
    return dict(line.partition(" ")[::2] for line in done.stdout.splitlines())


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh")
@pytest.mark.parametrize("policy", [None, "yes"])
def test_a_users_control_master_cannot_turn_sharing_back_on(tmp_path: Path, policy: HostKeyPolicy | None) -> None:
    user = tmp_path / "user config"
    user.write_text(SHARING_CONFIG.format(dir=tmp_path))
    # The negative control: read alone, the user's file shares connections.
    control = ssh_g(["ssh", "-F", str(user), "build"])
    assert control["controlmaster"] == "auto" and control["controlpath"].startswith(f"{tmp_path}/cm-")
    settings = SshSettings(host_key_policy=policy, config_file=str(user))
    text = session_config_text(str(user), home="/x", host_key_fallback=policy is None)
    config = str(write_fallback_config(text, tmp_path))
    seen = ssh_g(ssh_argv("ssh", Destination("build"), settings, "true", config=config))
    assert seen["controlmaster"] == "false"  # never a master
    assert "controlpath" not in seen  # `none`: never a client of someone else's master
    # A ProxyJump hop's ssh gets our -F file but none of our -o options: the file alone holds.
    hop = ssh_g(["ssh", "-F", config, "jumphost"])
    assert hop["controlmaster"] == "false" and "controlpath" not in hop


# -- options a user's ssh_config may not change -------------------------------------------------

USER_OVERRIDES_CONFIG = (
    "Host *\n"
    "  RemoteCommand echo from-the-config\n"
    "  PermitLocalCommand yes\n"
    "  LocalCommand echo local\n"
    "  StdinNull yes\n"
    "  SessionType none\n"
    "  ForkAfterAuthentication yes\n"
    "  LocalForward 127.0.0.1:40000 127.0.0.1:22\n"
    "  ConnectionAttempts 5\n"
    "  VisualHostKey yes\n"
    "  LogLevel QUIET\n"
)


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh")
def test_a_users_config_cannot_change_what_ssh_does_to_a_session(tmp_path: Path) -> None:
    user = tmp_path / "user config"
    user.write_text(USER_OVERRIDES_CONFIG)
    # The negative control: read alone, the user's file changes all of it.
    control = ssh_g(["ssh", "-F", str(user), "build"])
    assert control["remotecommand"] == "echo from-the-config"
    assert (control["permitlocalcommand"], control["stdinnull"], control["sessiontype"]) == ("yes", "yes", "none")
    assert control["forkafterauthentication"] == "yes" and "localforward" in control
    text = session_config_text(str(user), home="/x")
    config = str(write_fallback_config(text, tmp_path))
    seen = ssh_g(ssh_argv("ssh", Destination("build"), SshSettings(), "true", config=config))
    assert "remotecommand" not in seen
    assert (seen["permitlocalcommand"], seen["stdinnull"], seen["sessiontype"]) == ("no", "no", "default")
    assert seen["forkafterauthentication"] == "no"
    assert "localforward" not in seen and seen["clearallforwardings"] == "yes"
    assert (seen["connectionattempts"], seen["visualhostkey"], seen["loglevel"]) == ("1", "no", "VERBOSE")


@pytest.mark.parametrize(
    ("known", "expected"),
    [
        (frozenset(), []),
        (frozenset({"RemoteCommand"}), ["-o", "RemoteCommand=none"]),
        (frozenset({"StdinNull", "SessionType"}), ["-o", "StdinNull=no", "-o", "SessionType=default"]),
        (None, OVERRIDES[8:]),
    ],
)
def test_options_the_local_ssh_does_not_know_stay_out_of_the_argv(
    known: frozenset[str] | None, expected: list[str]
) -> None:
    argv = ssh_argv("ssh", Destination("build"), SshSettings(), "x", config=None, known_options=known)
    probed = [w for w in argv if w.partition("=")[0] in {name for name, _ in PROBED_OVERRIDES}]
    assert probed == expected[1::2]
    # What every OpenSSH knows always goes out.
    assert session_overrides(known)[:8] == OVERRIDES[:8]


def old_ssh(directory: Path, refused: tuple[str, ...]) -> Path:
    """An ``ssh`` that, like an older OpenSSH, refuses options it does not know (and logs each run)."""
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "runs.log"
    cases = "".join(
        f"    *{name}=*) echo 'Bad configuration option: {name.lower()}' >&2; exit 255;;\n" for name in refused
    )
    script = f'echo run >> {shlex.quote(str(log))}\nfor word in "$@"; do\n  case "$word" in\n{cases}  esac\ndone\n'
    path = directory / "ssh"
    path.write_text(f"#!/bin/sh\n{script}")
    path.chmod(0o755)
    return path


@pytest.fixture
def fresh_probe_cache() -> Iterator[None]:
    saved = dict(ssh_argv_module._known_options)
    ssh_argv_module._known_options.clear()
    yield
    ssh_argv_module._known_options.clear()
    ssh_argv_module._known_options.update(saved)


@pytest.mark.anyio
@pytest.mark.usefixtures("fresh_probe_cache")
async def test_the_probe_finds_what_an_older_ssh_knows_once_per_process(tmp_path: Path) -> None:
    # An OpenSSH 8.4: RemoteCommand, but none of 8.7's options.
    ssh = old_ssh(tmp_path / "bin", ("StdinNull", "SessionType", "ForkAfterAuthentication"))
    assert await local_ssh_options(str(ssh), os.environ) == frozenset({"RemoteCommand"})
    runs = (tmp_path / "bin" / "runs.log").read_text().count("run")
    assert runs == 1 + len(PROBED_OVERRIDES)  # all at once, then one by one
    assert await local_ssh_options(str(ssh), os.environ) == frozenset({"RemoteCommand"})
    assert (tmp_path / "bin" / "runs.log").read_text().count("run") == runs  # remembered


@pytest.mark.anyio
@pytest.mark.usefixtures("fresh_probe_cache")
async def test_the_answer_is_kept_for_the_next_process_while_the_binary_is_the_same(tmp_path: Path) -> None:
    ssh = old_ssh(tmp_path / "bin", ("StdinNull", "SessionType", "ForkAfterAuthentication"))
    log = tmp_path / "bin" / "runs.log"
    assert await local_ssh_options(str(ssh), os.environ) == frozenset({"RemoteCommand"})
    runs = log.read_text().count("run")
    ssh_argv_module._known_options.clear()  # as a new process starts
    assert await local_ssh_options(str(ssh), os.environ) == frozenset({"RemoteCommand"})
    assert log.read_text().count("run") == runs  # read from the cache directory, not asked
    # An upgraded client (another file) is asked again: this one knows everything.
    ssh.write_text(f"#!/bin/sh\necho run >> {shlex.quote(str(log))}\n")
    ssh_argv_module._known_options.clear()
    assert await local_ssh_options(str(ssh), os.environ) == frozenset(name for name, _ in PROBED_OVERRIDES)
    assert log.read_text().count("run") == runs + 1


@pytest.mark.anyio
@pytest.mark.usefixtures("fresh_probe_cache")
@pytest.mark.parametrize("damage", ["", "[", '["Nonsense"]', '{"a": 1}', "[1]"])
async def test_a_damaged_kept_answer_is_asked_again(tmp_path: Path, damage: str) -> None:
    ssh = old_ssh(tmp_path / "bin", ())
    assert len(await local_ssh_options(str(ssh), os.environ)) == len(PROBED_OVERRIDES)
    (kept,) = (Path(os.environ["REMOTE_ACP_CACHE_DIR"]) / "ssh-options").iterdir()
    kept.write_text(damage)
    ssh_argv_module._known_options.clear()
    assert len(await local_ssh_options(str(ssh), os.environ)) == len(PROBED_OVERRIDES)
    assert (tmp_path / "bin" / "runs.log").read_text().count("run") == 2


@pytest.mark.anyio
@pytest.mark.usefixtures("fresh_probe_cache")
async def test_a_probe_that_cannot_run_sends_only_what_every_ssh_knows_and_is_not_remembered(
    tmp_path: Path,
) -> None:
    missing = str(tmp_path / "no-such-ssh")
    assert await local_ssh_options(missing, os.environ) == frozenset()
    assert missing not in ssh_argv_module._known_options


@pytest.fixture
def installed_ssh() -> tuple[str, tuple[int, int]]:
    ssh = shutil.which("ssh")
    if ssh is None:
        pytest.skip("needs OpenSSH's ssh")
    version = subprocess.run([ssh, "-V"], capture_output=True, text=True, check=False).stderr  # OpenSSH_9.2p1 ...
    major, minor = (int(part) for part in version.split("_", 1)[1].split("p")[0].split(".")[:2])
    return ssh, (major, minor)


@pytest.mark.anyio
@pytest.mark.usefixtures("fresh_probe_cache")
async def test_the_installed_ssh_is_probed_for_real(installed_ssh: tuple[str, tuple[int, int]]) -> None:
    ssh, (major, minor) = installed_ssh
    known = await local_ssh_options(ssh, os.environ)
    assert ("RemoteCommand" in known) == ((major, minor) >= (7, 6))
    assert ("StdinNull" in known) == ("SessionType" in known) == ((major, minor) >= (8, 7))


# -- the bound of the start ---------------------------------------------------------------------


@pytest.mark.parametrize(("connect_s", "bound_ms"), [(1, 6_000), (3, 8_000), (5, 10_000), (10, 20_000), (60, 120_000)])
def test_ready_bound_is_the_connect_timeout_and_a_login_margin(connect_s: int, bound_ms: int) -> None:
    assert ready_bound_ms(SshSettings(connect_timeout_s=connect_s)) == bound_ms


# -- the command line ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        # SshSettings refuses 0 by the setting's name: the flag reached it.
        ("--ssh-max-concurrent-starts", "max_concurrent_starts must be at least 1"),
        ("--server-alive-count-max", "server_alive_count_max must be at least 1"),
        # Seconds, fractions too (rounded up for ssh), as check host takes them.
        ("--connect-timeout", "0 is not in the range x>=0.1"),
    ],
)
def test_the_ssh_flags_reach_the_settings(flag: str, said: str) -> None:
    from click.testing import CliRunner

    from remote_acp.cli.main import cli as command

    args = ["run", "--agent", "a", "--host", "build", "--workspace", "/tmp", flag, "0", "hi"]
    result = CliRunner().invoke(command, args)
    assert result.exit_code == 2, result.output
    assert said in result.output


@pytest.mark.anyio
@pytest.mark.usefixtures("fresh_probe_cache")
async def test_sessions_starting_together_share_one_probe(tmp_path: Path) -> None:
    ssh = old_ssh(tmp_path / "bin", ("ForkAfterAuthentication",))
    answers: list[frozenset[str]] = []

    async def start() -> None:
        answers.append(await local_ssh_options(str(ssh), os.environ))

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(start)
    assert answers == [frozenset({"RemoteCommand", "StdinNull", "SessionType"})] * 20
    # One probe for all twenty: all at once, refused, then one run per option.
    assert (tmp_path / "bin" / "runs.log").read_text().count("run") == 1 + len(PROBED_OVERRIDES)


@pytest.mark.anyio
@pytest.mark.usefixtures("fresh_probe_cache")
async def test_those_waiting_on_a_failed_probe_share_its_empty_answer_and_the_next_asks_again(
    tmp_path: Path,
) -> None:
    missing = str(tmp_path / "no-such-ssh")
    answers: list[frozenset[str]] = []

    async def start() -> None:
        answers.append(await local_ssh_options(missing, os.environ))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(start)
    assert answers == [frozenset()] * 5
    assert missing not in ssh_argv_module._known_options
    assert not ssh_argv_module._asking  # nothing left waiting: a later session probes again

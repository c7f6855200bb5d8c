"""Errors that say why, and whether to retry: each cause provoked against a real sshd.

Each reading is checked as data: the kind (the seeds'), the cause (:class:`~hostinv.causes.Cause`),
whether a retry can help (the cause's), the facts (destination, exit status, ssh's reason line)
and the fix, which lives in ``error.fix``, never in the message.

Login shells and accounts come from throwaway users (:mod:`integration.users`), an sshd with a
``ForceCommand`` is started here beside the lab's, and a server that stalls the key exchange is
a small TCP server (tests/support/causes.py). Where a reading depends on whether the remote side printed its
ready marker, which only the session core knows, the test runs the session's own ssh argv
(:func:`~remote_acp.targets.ssh.argv.ssh_argv`) by hand and reads its end with
:func:`~remote_acp.targets.ssh.errors.ssh_exit_error`, as the core would.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from hostinv.causes import CAUSES, Cause
from integration.sshlab import SSHD, free_port, keygen, wait_listening
from integration.users import throwaway_user
from remote_acp import ErrorKind, RemoteAcpError, SessionOptions, open_session
from remote_acp.targets.exit_status import ExitStatus
from remote_acp.targets.ssh.argv import ssh_argv
from remote_acp.targets.ssh.destination import Destination
from remote_acp.targets.ssh.errors import ssh_exit_error
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget, ssh_config_file
from remote_acp.targets.stderr_tail import StderrTail
from tests.support.agents import fast_options, scripted
from tests.support.causes import StallingServer

if TYPE_CHECKING:
    from collections.abc import Iterator

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

SSH_BOUNDS = {"read_timeout_ms": 5_000, "initialize_floor_ms": 30_000, "stop_grace_ms": 1_000}
READY_LINE = "remote-acp-test-ready"
RUN_TIMEOUT_S = 30


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated ssh_configs go to the test's own directory, never the user's cache."""
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


def options(*args: str) -> SessionOptions:
    return fast_options(scripted(*args), **SSH_BOUNDS)


def target(config: Path, host: str = "lab1", **settings: object) -> SshTarget:
    return SshTarget(host, SshSettings(config_file=str(config), **settings))  # type: ignore[arg-type]


async def start_error(tgt: SshTarget, command: str | list[str] | None = None) -> RemoteAcpError:
    opts = options() if command is None else fast_options(command, **SSH_BOUNDS)
    with pytest.raises(RemoteAcpError) as info, anyio.fail_after(120):
        async with open_session("/tmp", opts, target=tgt):
            pass
    return info.value


def assert_cause(err: RemoteAcpError | None, kind: ErrorKind, cause: Cause, destination: str) -> RemoteAcpError:
    """``err`` is ``kind`` with ``cause``, its retryability and fix are the cause's, it names
    ``destination`` in its facts and its JSON, and its message carries no fix."""
    assert err is not None
    assert (err.kind, err.cause) == (kind, cause), repr(err)
    assert err.retryable is CAUSES[cause].retryable
    assert err.facts.destination == destination, err.facts
    data = err.to_json()
    assert (data["error_kind"], data["cause"], data["retryable"]) == (kind.value, cause.value, err.retryable)
    assert data["fix"] == (err.fix or None) and data["facts"]["destination"] == destination
    if err.fix:
        assert err.fix not in err.message
    return err


def read_by_hand(
    destination: str, config: Path, remote: str, *, known_options: frozenset[str] | None = None
) -> tuple[RemoteAcpError | None, bool]:
    """Run the session's ssh argv with ``remote`` (which prints :data:`READY_LINE` once the login
    ran it) and read its end as the core would: the error, and whether the ready line came."""
    settings = SshSettings(config_file=str(config))
    argv = ssh_argv(
        "ssh", Destination(destination), settings, remote, config=ssh_config_file(settings), known_options=known_options
    )
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=RUN_TIMEOUT_S, check=False)
    tail = StderrTail()
    tail.feed(done.stderr)
    ready = READY_LINE.encode() in done.stdout
    status = ExitStatus(done.returncode)
    error = ssh_exit_error(destination, status, agent_wrote=bool(done.stdout), stderr=tail.report(), ready=ready)
    return error, ready


# -- before the login ---------------------------------------------------------------------------


async def test_changed_host_key_is_permanent_and_names_the_fix(ssh_lab: SshLab, tmp_path: Path) -> None:
    other = tmp_path / "other_host_key"
    keygen(other)
    lab1 = ssh_lab.host("lab1")
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[{lab1.address}]:{lab1.port} {' '.join(other.with_suffix('.pub').read_text().split()[:2])}\n")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=wrong)
    err = await start_error(target(config))  # accept-new, the default, still refuses a change
    assert_cause(err, ErrorKind.PORT_EXIT, Cause.HOST_KEY_CHANGED, "lab1")
    assert not err.retryable and err.facts.exit_status == 255
    assert err.message.startswith("the host key of lab1 has changed")
    key_name = f"[{lab1.address}]:{lab1.port}"
    assert (err.facts.known_hosts, err.facts.key_name) == (str(wrong), key_name)
    # ssh-keygen's own removal, quoted for a shell (ssh quotes it for the eye), ends the fix
    command = f"ssh-keygen -f {shlex.quote(str(wrong))} -R {shlex.quote(key_name)}"
    assert err.fix.endswith(": " + command), err.fix
    assert "ssh-keygen" not in err.message
    # Run as printed, it removes the stale key; accept-new then takes the real one and starts.
    done = await anyio.run_process(shlex.split(err.fix.rsplit(": ", 1)[1]), check=False)
    assert done.returncode == 0, done.stderr
    with anyio.fail_after(60):
        async with open_session("/tmp", options(), target=target(config)):
            pass
    assert lab1.known_hosts_line.split(" ", 1)[1] in wrong.read_text()


async def test_unknown_host_key_with_policy_yes_is_permanent(ssh_lab: SshLab, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=empty)
    err = await start_error(target(config, host_key_policy="yes"))
    assert_cause(err, ErrorKind.PORT_EXIT, Cause.HOST_KEY_UNKNOWN, "lab1")
    assert not err.retryable and err.facts.exit_status == 255
    assert err.message.startswith("the host key of lab1 is not known")
    assert "Host key verification failed" in err.detail
    # Through the ssh_config the session was given, as the session met the host.
    assert err.fix.endswith(f": ssh -o StrictHostKeyChecking=accept-new -F {config} lab1 true"), err.fix


async def test_refused_authentication_is_permanent(ssh_lab: SshLab, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    keygen(stranger)
    config = ssh_lab.config_variant(tmp_path / "cfg", identity=stranger)
    err = await start_error(target(config))
    assert_cause(err, ErrorKind.PORT_EXIT, Cause.AUTH_FAILED, "lab1")
    assert not err.retryable and err.facts.exit_status == 255
    assert err.facts.ssh_reason == "root@127.0.0.2: Permission denied (publickey)."
    assert err.message.startswith("lab1 refused the authentication") and err.facts.ssh_reason in err.message
    assert err.fix.endswith(f": ssh-copy-id -F {config} lab1"), err.fix


async def test_a_refused_connection_stays_retryable(ssh_lab: SshLab) -> None:
    err = await start_error(target(ssh_lab.config, "root@127.0.0.2:9"))
    assert_cause(err, ErrorKind.PORT_EXIT, Cause.CONNECT_REFUSED, "root@127.0.0.2:9")
    assert err.retryable and err.facts.exit_status == 255
    assert err.facts.ssh_reason == "connect to host 127.0.0.2 port 9: Connection refused"
    assert err.facts.ssh_target == f"-F {ssh_lab.config} -p 9 root@127.0.0.2"
    assert err.fix == CAUSES[Cause.CONNECT_REFUSED].fix


async def test_remote_command_conflict_is_permanent_where_ssh_cannot_override_it(
    ssh_lab: SshLab, tmp_path: Path
) -> None:
    config = tmp_path / "cfg"
    config.write_text("Host lab1\n  RemoteCommand echo from-the-config\n\n" + ssh_lab.config.read_text())
    # An ssh that does not know RemoteCommand=none, as a client older than 7.6 would be.
    error, ready = await anyio.to_thread.run_sync(
        lambda: read_by_hand("lab1", config, f"echo {READY_LINE}", known_options=frozenset())
    )
    assert not ready
    assert_cause(error, ErrorKind.PORT_EXIT, Cause.SSH_CONFIG_INVALID, "lab1")
    assert error is not None and not error.retryable
    assert error.message.startswith("the ssh_config sets a RemoteCommand for lab1")
    # Where it knows the option, the override wins and the command runs.
    error, ready = await anyio.to_thread.run_sync(lambda: read_by_hand("lab1", config, f"echo {READY_LINE}"))
    assert ready and error is None


# -- after the login ----------------------------------------------------------------------------


async def test_agent_missing_on_the_host_is_port_exit_with_the_cause_agent_not_found(ssh_lab: SshLab) -> None:
    # The seeds' rule: ssh's 127 reaches the session as the loss of its connection (port_exit),
    # with the remote shell's own words; the cause says it will not go away on a retry.
    err = await start_error(target(ssh_lab.config), "remote-acp-no-such-agent --acp")
    assert_cause(err, ErrorKind.PORT_EXIT, Cause.AGENT_NOT_FOUND, "lab1")
    assert not err.retryable and err.facts.exit_status == 127
    assert err.message.startswith("the agent command was not found on lab1 (")
    assert err.facts.ssh_reason is not None and "remote-acp-no-such-agent" in err.facts.ssh_reason
    assert err.facts.ssh_reason in err.message
    assert err.fix == CAUSES[Cause.AGENT_NOT_FOUND].fix
    for chatter in ("Authenticated to", "Transferred: sent", "Bytes per second"):
        assert chatter not in err.message and chatter not in err.facts.ssh_reason


@pytest.fixture
def homes() -> Iterator[Path]:
    """Where throwaway users' homes go: a directory every user can traverse."""
    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"ra-homes-{os.getpid()}-{time.monotonic_ns()}"
    base.mkdir(mode=0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(
    "shell",
    [
        "/bin/false",
        pytest.param("/usr/sbin/nologin", marks=pytest.mark.skipif(not os.path.exists("/usr/sbin/nologin"), reason="")),
    ],
)
async def test_a_login_shell_that_runs_no_command_is_permanent(ssh_lab: SshLab, homes: Path, shell: str) -> None:
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), shell=shell, base=homes) as user:
        error, ready = await anyio.to_thread.run_sync(
            lambda: read_by_hand(user.destination("lab1"), ssh_lab.config, f"echo {READY_LINE}")
        )
    assert not ready
    assert_cause(error, ErrorKind.PORT_EXIT, Cause.LOGIN_REFUSED, user.destination("lab1"))
    assert error is not None and not error.retryable and error.facts.exit_status == 1
    assert error.message.startswith(f"the login on {user.name}@lab1 ended with exit status 1 before the session's")
    assert "nologin" in error.message
    assert error.fix == CAUSES[Cause.LOGIN_REFUSED].fix


async def test_a_false_login_shell_ends_a_session_start_as_permanent(ssh_lab: SshLab, homes: Path) -> None:
    # The whole way: /bin/false says nothing and writes nothing, which is enough to read it.
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), shell="/bin/false", base=homes) as user:
        err = await start_error(target(ssh_lab.config, user.destination("lab1")))
    assert_cause(err, ErrorKind.PORT_EXIT, Cause.LOGIN_REFUSED, user.destination("lab1"))
    assert not err.retryable and err.facts.exit_status == 1
    assert "before the session's command started" in err.message


@pytest.mark.skipif(not os.path.exists("/bin/rbash"), reason="no rbash here")
async def test_a_restricted_shell_is_permanent(ssh_lab: SshLab, homes: Path) -> None:
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), shell="/bin/rbash", base=homes) as user:
        err = await start_error(target(ssh_lab.config, user.destination("lab1")))
    assert_cause(err, ErrorKind.PORT_EXIT, Cause.LOGIN_REFUSED, user.destination("lab1"))
    assert not err.retryable and err.facts.exit_status == 1
    assert err.message.startswith(f"the login shell on {user.name}@lab1 is a restricted shell")
    assert "restricted)" in err.message


@pytest.fixture
def forced_host(ssh_lab: SshLab, tmp_path: Path) -> Iterator[Path]:
    """An sshd beside lab1's (same address, key and users) whose sshd_config forces a command
    that is not ours; the ssh_config it returns names it ``labforced``."""
    lab1 = ssh_lab.host("lab1")
    port = free_port(lab1.address)
    root = tmp_path / "forced"
    root.mkdir()
    text = (lab1.root / "sshd_config").read_text()
    text = text.replace(f"Port {lab1.port}\n", f"Port {port}\n")
    text = text.replace(str(lab1.root / "sshd.pid"), str(root / "sshd.pid"))
    (root / "sshd_config").write_text(text + "ForceCommand printf 'forced by sshd_config\\n'\n")
    known_hosts = root / "known_hosts"
    key = lab1.known_hosts_line.split(" ", 1)[1]
    known_hosts.write_text(f"{ssh_lab.known_hosts.read_text()}[{lab1.address}]:{port} {key}\n")
    config = ssh_lab.config_variant(root / "ssh_config", known_hosts=known_hosts)
    config.write_text(f"Host labforced\n  HostName {lab1.address}\n  Port {port}\n\n" + config.read_text())
    with (root / "sshd.log").open("wb") as log:
        sshd = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(root / "sshd_config")], stdout=log, stderr=log, start_new_session=True
        )
    try:
        wait_listening(lab1.address, port)
        yield config
    finally:
        sshd.kill()
        sshd.wait()


async def test_a_force_command_that_is_not_ours_is_permanent(forced_host: Path) -> None:
    error, ready = await anyio.to_thread.run_sync(lambda: read_by_hand("labforced", forced_host, f"echo {READY_LINE}"))
    assert not ready
    assert_cause(error, ErrorKind.PORT_EXIT, Cause.LOGIN_REFUSED, "labforced")
    assert error is not None and not error.retryable and error.facts.exit_status == 0
    assert error.message.startswith("the login on labforced ended with exit status 0 before the session's command")
    assert "ForceCommand" in error.message


# -- reasons, not "no standard-error output" ----------------------------------------------------


async def test_a_keepalive_timeout_quotes_ssh(ssh_lab: SshLab, tmp_path: Path) -> None:
    lab4 = ssh_lab.namespaced
    tgt = target(ssh_lab.config, lab4.alias, server_alive_interval_s=1, server_alive_count_max=2)
    try:
        async with open_session("/tmp", options(), target=tgt) as session:
            async with session.turn("@sleep=60") as turn:
                lab4.cut_link()
                with anyio.fail_after(30):
                    async for _ in turn:
                        pass
    finally:
        lab4.restore_link()
    assert turn.result is not None and turn.result.error is not None
    error = turn.result.error
    assert (error.kind, error.cause, error.retryable) == (ErrorKind.PORT_EXIT, Cause.LINK_LOST, True), repr(error)
    assert f"Timeout, server {lab4.address} not responding." in str(error)


# -- the connect timeout covers the whole connection setup ---------------------------------------


@pytest.fixture
def stalling_server() -> Iterator[StallingServer]:
    server = StallingServer()
    try:
        yield server
    finally:
        server.close()


CONNECT_TIMEOUT_S = 3


async def stalled_start(stalling_server: StallingServer) -> tuple[RemoteAcpError, float]:
    tgt = SshTarget(
        f"root@127.0.0.1:{stalling_server.port}", SshSettings(config_file="none", connect_timeout_s=CONNECT_TIMEOUT_S)
    )
    started = time.monotonic()
    with anyio.fail_after(120):  # the keepalives alone would end it after 45 s
        err = await start_error(tgt)
    return err, time.monotonic() - started


async def test_a_stalled_key_exchange_ends_within_about_the_connect_timeout_saying_the_setup_did_not_complete(
    stalling_server: StallingServer,
) -> None:
    # One stalled start (about 8 s) read for both its bound and what it says.
    err, elapsed = await stalled_start(stalling_server)
    assert stalling_server.connections, "ssh never reached the server"
    assert elapsed < CONNECT_TIMEOUT_S + 10, f"took {elapsed:.1f} s: {err}"
    assert_cause(err, ErrorKind.PORT_EXIT, Cause.CONNECT_TIMEOUT, f"root@127.0.0.1:{stalling_server.port}")
    assert err.retryable and err.facts.bound_ms is not None and err.facts.bound_ms > 0
    assert "connection setup to root@127.0.0.1" in err.message and "did not complete in time" in err.message


# -- the same causes, the whole way through a session ------------------------------------------


@pytest.mark.skipif(not os.path.exists("/usr/sbin/nologin"), reason="no nologin here")
async def test_a_nologin_shell_ends_a_session_start_as_permanent(ssh_lab: SshLab, homes: Path) -> None:
    with throwaway_user(ssh_lab.client_key.with_suffix(".pub"), shell="/usr/sbin/nologin", base=homes) as user:
        err = await start_error(target(ssh_lab.config, user.destination("lab1")))
    assert_cause(err, ErrorKind.PORT_EXIT, Cause.LOGIN_REFUSED, user.destination("lab1"))
    assert not err.retryable and err.facts.exit_status == 1
    assert "before the session's command started" in err.message and "nologin" in err.message


async def test_a_force_command_ends_a_session_start_as_permanent(forced_host: Path) -> None:
    err = await start_error(target(forced_host, "labforced"))
    assert_cause(err, ErrorKind.PORT_EXIT, Cause.LOGIN_REFUSED, "labforced")
    assert not err.retryable and err.facts.exit_status == 0
    assert "ForceCommand" in err.message

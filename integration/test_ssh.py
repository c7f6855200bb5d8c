"""Sessions over real ssh to real sshd hosts: the same behaviour as local, every exit-code row,
environment over stdin, hostile workspaces, and no remote process outliving its session."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from integration.sshlab import SshLab, keygen
from remote_acp import ErrorKind, Event, Notification, RemoteAcpError, SessionOptions, open_session
from remote_acp.errors import Cause
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options, scripted
from tests.support.cli import AGENT
from tests.support.processes import cmdline, gone_within, pids

pytestmark = pytest.mark.anyio

SSH_BOUNDS = {"read_timeout_ms": 5_000, "initialize_floor_ms": 15_000, "stop_grace_ms": 1_000}


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated ssh_configs go to the test's own directory, never the user's cache."""
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


def options(*args: str, **overrides: object) -> SessionOptions:
    return fast_options(scripted(*args), **{**SSH_BOUNDS, **overrides})


def target(lab: SshLab, host: str = "lab1", config: Path | None = None, **settings: object) -> SshTarget:
    return SshTarget(host, SshSettings(config_file=str(config or lab.config), **settings))  # type: ignore[arg-type]


async def start_error(lab: SshLab, tgt: SshTarget, workspace: str = "/tmp", *args: str) -> RemoteAcpError:
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, options(*args), target=tgt):
            pass
    return info.value


@pytest.mark.both_backends
async def test_handshake_and_turns_over_ssh(ssh_lab: SshLab, workspace: str, tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    events: list[Event] = []
    async with open_session(workspace, options("--env-dump", str(dump)), target=target(ssh_lab)) as s:
        assert s.info is not None and s.info.target == "lab1" and s.session_id == "sess-1"
        for word in ("one", "two", "three"):
            result = await s.run_turn(f"@chunks=2 @tool {word}", events.append)
            assert result.ok and result.last_message == word
    assert json.loads(dump.read_text())["__cwd__"] == workspace
    deltas = [e.delta for e in events if isinstance(e, Notification) and e.delta]
    assert "".join(deltas) == "onetwothree"


async def test_three_hosts_at_once(ssh_lab: SshLab, workspace: str) -> None:
    results: dict[str, str] = {}

    async def run(host: str) -> None:
        async with open_session(workspace, options(), target=target(ssh_lab, host)) as s:
            results[host] = (await s.run_turn(f"hello {host}")).last_message

    async with anyio.create_task_group() as tg:
        for host in ("lab1", "lab2", "lab3"):
            tg.start_soon(run, host)
    assert results == {h: f"hello {h}" for h in ("lab1", "lab2", "lab3")}


# -- exit-code rows ---------------------------------------------------------------------------


async def test_closed_port_is_ssh_connection_failed(ssh_lab: SshLab) -> None:
    tgt = SshTarget("root@127.0.0.2:9", SshSettings(config_file=str(ssh_lab.config)))
    err = await start_error(ssh_lab, tgt)
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.PORT_EXIT, Cause.CONNECT_REFUSED, True)
    assert err.message.endswith("Connection refused") and "refused the ssh connection" in err.message
    assert "Connection refused" in (err.facts.ssh_reason or "") and err.detail == ""  # said once, in the message


async def test_unknown_host_key_with_policy_yes(ssh_lab: SshLab, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=empty)
    err = await start_error(ssh_lab, target(ssh_lab, config=config, host_key_policy="yes"))
    assert err.kind is ErrorKind.PORT_EXIT and not err.retryable
    assert err.message.startswith("the host key of lab1 is not known")
    assert "Host key verification failed" in err.detail
    assert empty.read_text() == ""


async def test_unknown_host_key_is_accepted_new_by_default(ssh_lab: SshLab, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=empty)
    async with open_session("/tmp", options(), target=target(ssh_lab, config=config)) as s:
        assert (await s.run_turn("hi")).ok
    assert ssh_lab.host("lab1").known_hosts_line.split()[1] in empty.read_text()


async def test_changed_host_key(ssh_lab: SshLab, tmp_path: Path) -> None:
    other = tmp_path / "other_host_key"
    keygen(other)
    lab1 = ssh_lab.host("lab1")
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[{lab1.address}]:{lab1.port} {' '.join(other.with_suffix('.pub').read_text().split()[:2])}\n")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=wrong)
    err = await start_error(ssh_lab, target(ssh_lab, config=config))  # accept-new still refuses a change
    assert err.kind is ErrorKind.PORT_EXIT and not err.retryable
    assert err.message.startswith("the host key of lab1 has changed")


async def test_wrong_client_key(ssh_lab: SshLab, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    keygen(stranger)
    config = ssh_lab.config_variant(tmp_path / "cfg", identity=stranger)
    err = await start_error(ssh_lab, target(ssh_lab, config=config))
    assert err.kind is ErrorKind.PORT_EXIT and not err.retryable
    assert err.message.startswith("lab1 refused the authentication")
    assert "Permission denied" in err.message and "Permission denied" in (err.facts.ssh_reason or "")


async def test_missing_remote_binary_is_agent_not_found(ssh_lab: SshLab) -> None:
    with pytest.raises(RemoteAcpError) as info:
        async with open_session("/tmp", fast_options("remote-acp-no-such-agent --acp"), target=target(ssh_lab)):
            pass
    err = info.value
    # ssh's 127 is the loss of the connection (the seeds' port_exit), its cause the missing agent
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.PORT_EXIT, Cause.AGENT_NOT_FOUND, False)
    assert err.facts.exit_status == 127
    assert err.message.startswith("the agent command was not found on lab1 (")
    assert "remote-acp-no-such-agent" in str(err) and "not found" in str(err)


async def test_missing_remote_workspace(ssh_lab: SshLab) -> None:
    err = await start_error(ssh_lab, target(ssh_lab), "/nonexistent/remote-acp ws")
    assert err.kind is ErrorKind.INVALID_WORKSPACE_CWD
    assert err.message == "the workspace /nonexistent/remote-acp ws does not exist on lab1"
    assert "/nonexistent/remote-acp ws" in err.detail


async def test_relative_remote_workspace_is_refused(ssh_lab: SshLab) -> None:
    err = await start_error(ssh_lab, target(ssh_lab), "relative/ws")
    assert err.kind is ErrorKind.INVALID_WORKSPACE_CWD and "not absolute" in str(err)


async def test_missing_local_ssh_is_agent_not_found(ssh_lab: SshLab, tmp_path: Path) -> None:
    tgt = SshTarget("lab1", SshSettings(config_file=str(ssh_lab.config)), environ={"PATH": str(tmp_path)})
    err = await start_error(ssh_lab, tgt)
    assert err.kind is ErrorKind.AGENT_NOT_FOUND
    assert str(err) == "ssh binary not found on this host's PATH"


async def test_exit_255_after_output_is_not_a_connection_failure(ssh_lab: SshLab) -> None:
    async with open_session("/tmp", options(), target=target(ssh_lab)) as s:
        result = await s.run_turn("@crash=255 bye")
    assert result.error is not None and result.error.kind is ErrorKind.PORT_EXIT
    assert result.error.message == "the agent's connection ended before a response arrived"
    assert "exit status 255" in result.error.detail and "crashing mid-turn" in result.error.detail


async def test_remote_death_by_signal_is_reported_as_such(ssh_lab: SshLab, tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    async with open_session("/tmp", options("--pid-file", str(pid_file)), target=target(ssh_lab)) as s:
        async with s.turn("@sleep=30") as turn:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            async for _ in turn:
                pass
    assert turn.result is not None and turn.result.error is not None
    assert turn.result.error.kind is ErrorKind.PORT_EXIT
    assert "the agent was killed by signal 9" in turn.result.error.detail
    assert "ssh connection failed" not in str(turn.result.error)


# -- connection loss mid-turn -----------------------------------------------------------------


async def test_per_connection_sshd_killed_mid_turn(ssh_lab: SshLab, tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    lab2 = ssh_lab.host("lab2")
    async with open_session("/tmp", options("--pid-file", str(pid_file)), target=target(ssh_lab, "lab2")) as s:
        async with s.turn("@sleep=30") as turn:
            sessions = lab2.session_processes()
            agent = int(pid_file.read_text())
            for pid in sessions:
                if b"sshd" in cmdline(pid) and pid != agent:
                    os.kill(pid, signal.SIGKILL)
            with anyio.fail_after(3):
                async for _ in turn:
                    pass
    assert turn.result is not None and turn.result.error is not None
    assert turn.result.error.kind is ErrorKind.PORT_EXIT
    assert await gone_within([agent], 10)


async def test_link_cut_mid_turn_ends_within_keepalive_bound(ssh_lab: SshLab, tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    lab4 = ssh_lab.namespaced
    tgt = target(ssh_lab, lab4.alias, server_alive_interval_s=1, server_alive_count_max=2)
    try:
        async with open_session("/tmp", options("--pid-file", str(pid_file)), target=tgt) as s:
            async with s.turn("@sleep=60") as turn:
                agent = int(pid_file.read_text())
                lab4.cut_link()
                started = time.monotonic()
                with anyio.fail_after(10):
                    async for _ in turn:
                        pass
                elapsed = time.monotonic() - started
        assert turn.result is not None and turn.result.error is not None
        assert turn.result.error.kind is ErrorKind.PORT_EXIT
        assert elapsed < 8  # keepalive bound: 1 s x 2 probes, plus slack on a busy machine
        # The host's sshd notices the client is gone (ClientAliveInterval) and the tree dies.
        assert await gone_within([agent], 15)
    finally:
        lab4.restore_link()


# -- environment over stdin -------------------------------------------------------------------


async def test_environment_travels_on_stdin_never_on_argv(
    ssh_lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-value-with 'quotes' and $dollar;"
    monkeypatch.setenv("RA_DEMO_TOKEN", secret)
    monkeypatch.setenv("RA_DEMO_MODE", "fast")
    dump = tmp_path / "env.json"
    tgt = target(ssh_lab, pass_env=("RA_DEMO_TOKEN", "RA_DEMO_MODE"))
    async with open_session("/tmp", options("--env-dump", str(dump)), target=tgt) as s:
        assert (await s.run_turn("hi")).ok
        for pid in pids():
            assert b"s3cr3t-value" not in cmdline(pid), f"the value is on the argv of pid {pid}"
    env = json.loads(dump.read_text())
    assert env["RA_DEMO_TOKEN"] == secret and env["RA_DEMO_MODE"] == "fast"
    assert "_RA_ENV" not in env and "_RA_COMPLETE" not in env


async def test_environment_value_that_is_not_utf8_arrives_as_its_bytes(
    ssh_lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = os.fsdecode(b"tok\xffen-\xc3(-value")  # as os.environ holds undecodable bytes
    monkeypatch.setenv("RA_DEMO_RAW", value)
    dump = tmp_path / "env.json"
    async with open_session(
        "/tmp", options("--env-dump", str(dump)), target=target(ssh_lab, pass_env=("RA_DEMO_RAW",))
    ):
        pass
    assert os.fsencode(json.loads(dump.read_text())["RA_DEMO_RAW"]) == b"tok\xffen-\xc3(-value"


async def test_carried_values_are_masked_whatever_their_names(
    ssh_lab: SshLab, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    value = "plain-looking-value-4821"  # neither the name nor the value looks secret
    monkeypatch.setenv("RA_DEMO_FLAVOUR", value)
    agent = 'echo "flavour is $RA_DEMO_FLAVOUR" >&2; exit 3'  # a fragment run by the remote shell
    with caplog.at_level(logging.DEBUG), pytest.raises(RemoteAcpError) as info:
        async with open_session(
            "/tmp", fast_options(agent, **SSH_BOUNDS), target=target(ssh_lab, pass_env=("RA_DEMO_FLAVOUR",))
        ):
            pass
    err = info.value
    assert err.kind is ErrorKind.PORT_EXIT and "exit status 3" in err.message
    assert "flavour is ***" in err.detail  # the value arrived, and was masked on the way back
    assert value not in str(err)
    assert not [record for record in caplog.records if value in record.getMessage() or value in str(record.__dict__)]


async def test_invalid_pass_env_name_is_refused() -> None:
    with pytest.raises(ValueError, match="ssh_pass_env entry 1 is not a valid environment variable name"):
        SshSettings(pass_env=("GOOD", "BAD-NAME=x"))


async def test_pass_env_variable_that_is_not_set(ssh_lab: SshLab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RA_NOT_SET", raising=False)
    err = await start_error(ssh_lab, target(ssh_lab, pass_env=("RA_NOT_SET",)))
    assert err.kind is ErrorKind.AGENT_NOT_FOUND
    assert str(err) == "ssh_pass_env names RA_NOT_SET, which is not set in the environment"


@pytest.mark.parametrize(
    "name", ["with space", "it's quoted", "dollar $HOME", "semi;colon && true", "-leading-dash", 'dq"uote']
)
async def test_hostile_workspace_paths_arrive_intact(ssh_lab: SshLab, tmp_path: Path, name: str) -> None:
    workspace = tmp_path / name
    workspace.mkdir()
    dump = tmp_path / "env.json"
    async with open_session(str(workspace), options("--env-dump", str(dump)), target=target(ssh_lab)) as s:
        assert (await s.run_turn("hi")).ok
    assert json.loads(dump.read_text())["__cwd__"] == str(workspace)


# -- no remote orphans ------------------------------------------------------------------------


@pytest.mark.parametrize("stubborn", [False, True])
async def test_session_stop_kills_the_remote_tree(ssh_lab: SshLab, tmp_path: Path, stubborn: bool) -> None:
    pid_file, child_file = tmp_path / "agent.pid", tmp_path / "child.pid"
    args = ["--pid-file", str(pid_file), "--child", "setsid", "--child-pid-file", str(child_file)]
    if stubborn:
        args += ["--ignore-sigterm", "--no-stdin-eof-exit"]
    async with open_session("/tmp", options(*args), target=target(ssh_lab, kill_grace_s=1)) as s:
        assert (await s.run_turn("hi")).ok
        agent, child = int(pid_file.read_text()), int(child_file.read_text())
        assert os.getpgid(child) != os.getpgid(agent)  # the child left the agent's group
    assert await gone_within([agent, child], 10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
async def test_local_ssh_killed_kills_the_remote_tree(ssh_lab: SshLab, tmp_path: Path, sig: int) -> None:
    pid_file, child_file = tmp_path / "agent.pid", tmp_path / "child.pid"
    args = ["--pid-file", str(pid_file), "--child", "setsid", "--child-pid-file", str(child_file)]
    args += ["--ignore-sigterm", "--no-stdin-eof-exit"]
    async with open_session("/tmp", options(*args), target=target(ssh_lab, kill_grace_s=1)) as s:
        async with s.turn("@sleep=60") as turn:
            agent, child = int(pid_file.read_text()), int(child_file.read_text())
            assert s.pid is not None
            os.kill(s.pid, sig)  # the local ssh relay dies
            with anyio.fail_after(5):
                async for _ in turn:
                    pass
        assert turn.result is not None and turn.result.error is not None
        assert turn.result.error.kind is ErrorKind.PORT_EXIT
        assert await gone_within([agent, child], 10)


async def test_no_policy_requires_force(ssh_lab: SshLab, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ValueError, match="set force_insecure_host_keys"):
        SshSettings(host_key_policy="no")
    async with open_session(
        "/tmp", options(), target=target(ssh_lab, host_key_policy="no", force_insecure_host_keys=True)
    ):
        pass
    assert any("host key checking is off for this session" in m for m in caplog.messages)


async def test_user_ssh_config_policy_wins_over_our_default(ssh_lab: SshLab, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=empty)
    config.write_text("Host *\n  StrictHostKeyChecking yes\n\n" + config.read_text())
    err = await start_error(ssh_lab, target(ssh_lab, config=config))  # our default would accept-new
    assert err.message.startswith("the host key of lab1 is not known") and not err.retryable
    assert "Host key verification failed" in err.detail


async def test_user_ssh_config_ask_wins_over_our_default(ssh_lab: SshLab, tmp_path: Path) -> None:
    # `ask` is also OpenSSH's default, so `ssh -G` cannot tell it was set; set explicitly, it
    # must still win over our accept-new (under BatchMode it refuses an unknown host key).
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=empty)
    config.write_text("Host lab1\n  StrictHostKeyChecking ask\n\n" + config.read_text())
    err = await start_error(ssh_lab, target(ssh_lab, config=config))
    assert err.kind is ErrorKind.PORT_EXIT
    assert err.message.startswith("the host key of lab1 is not known") and not err.retryable
    assert "Host key verification failed" in err.detail
    assert empty.read_text() == ""
    async with open_session("/tmp", options(), target=target(ssh_lab, "lab2", config=config)) as s:
        assert (await s.run_turn("hi")).ok  # another host of the same file: our default applies
    assert ssh_lab.host("lab2").known_hosts_line.split()[1] in empty.read_text()


async def test_user_ssh_config_no_connects_and_is_warned(
    ssh_lab: SshLab, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=empty)
    config.write_text("Host lab1\n  StrictHostKeyChecking no\n\n" + config.read_text())
    async with open_session("/tmp", options(), target=target(ssh_lab, config=config)) as s:
        assert (await s.run_turn("hi")).ok
    assert any("the ssh_config turns host key checking off for this host" in m for m in caplog.messages)


def test_cli_run_over_ssh(ssh_lab: SshLab, workspace: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "remote_acp.cli.main", "run", "--json", "--host", "lab3",
         "--ssh-config", str(ssh_lab.config), "--workspace", workspace,
         "--agent", AGENT, "@chunks=3 over the wire"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[-1]["outcome"] == "turn_completed"
    assert [line["message"] for line in lines if line["type"] == "notification" and not line["delta"]] == [
        "this session started with a declared capability gap in: tool servers, token counts, session continuation",
        "over the wire",
    ]


async def test_connect_timeout_to_an_unreachable_host(ssh_lab: SshLab) -> None:
    lab4 = ssh_lab.namespaced
    lab4.cut_link()
    try:
        started = time.monotonic()
        with anyio.fail_after(10):
            err = await start_error(ssh_lab, target(ssh_lab, lab4.alias, connect_timeout_s=1))
        elapsed = time.monotonic() - started
    finally:
        lab4.restore_link()
    assert (err.kind, err.cause, err.retryable) == (ErrorKind.PORT_EXIT, Cause.CONNECT_TIMEOUT, True)
    assert "timed out" in err.detail and "timed out" in err.message
    assert elapsed < 8  # ConnectTimeout=1 plus slack on a busy machine


def test_cli_resume_continues_on_the_host_the_session_ran_on(ssh_lab: SshLab, workspace: str, tmp_path: Path) -> None:
    from datetime import datetime, timedelta

    state = tmp_path / "agent-state"
    state.mkdir()
    agent = f"{AGENT} --state-dir {state} --advertise load"

    def run(*args: str) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-m", "remote_acp.cli.main", "run", "--json", "--ssh-config", str(ssh_lab.config),
             "--agent", f"{agent} --session-id far-1", *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
        return result

    run("--host", "lab3", "--workspace", workspace, "hello")
    history = Path(os.environ["REMOTE_ACP_STATE_DIR"]) / "sessions.jsonl"
    records = [json.loads(line) for line in history.read_text().splitlines()]
    for record in records:  # created in an earlier minute: the load need not wait one out
        then = datetime.fromisoformat(str(record["created"])) - timedelta(minutes=2)
        record["created"] = then.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    history.write_text("".join(json.dumps(r) + "\n" for r in records))
    again = run("--resume", "far-1", "go on")  # neither --host nor --workspace: the recorded ones
    assert (again["session_id"], again["obtained"]) == ("far-1", "loaded")
    latest = json.loads(history.read_text().splitlines()[-1])
    assert (latest["target"], latest["workspace"]) == ("lab3", workspace)


async def test_an_explicit_accept_new_never_loosens_a_config_that_says_yes(ssh_lab: SshLab, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=empty)
    config.write_text("Host lab1\n  StrictHostKeyChecking yes\n\n" + config.read_text())
    strict = SshTarget("lab1", SshSettings(config_file=str(config), host_key_policy="accept-new"))
    err = await start_error(ssh_lab, strict)
    assert (err.kind, err.cause) == (ErrorKind.PORT_EXIT, Cause.HOST_KEY_UNKNOWN)
    assert empty.read_text() == ""  # nothing written the config did not allow
    # Where the config says nothing, accept-new takes the new key, as asked.
    async with open_session("/tmp", options(), target=SshTarget("lab2", strict.settings)) as s:
        assert (await s.run_turn("hi")).ok
    assert ssh_lab.host("lab2").known_hosts_line.split()[1] in empty.read_text()


async def test_secrets_assigned_in_a_shell_fragment_command_are_masked(ssh_lab: SshLab) -> None:
    secret = "supersecret-1234-abcd"
    command = f"FAKE_API_KEY={secret} sh -c 'echo leaked=$FAKE_API_KEY >&2; exit 3'"
    with anyio.fail_after(30), pytest.raises(RemoteAcpError) as info:
        async with open_session("/tmp", SessionOptions(command=command), target=target(ssh_lab)):
            pass
    assert secret not in str(info.value) and "leaked=***" in str(info.value)

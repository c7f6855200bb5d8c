"""The real qwen-code runtime on the far side of a real ssh connection (the lab's ``lab1``).

The "remote" host is this machine, reached through the lab's own sshd on 127.0.0.2, so the
absolute path of the pinned qwen executable works there and the OpenAI mock on 127.0.0.1 is
reachable. Nothing of the local environment crosses ssh except the suite's orphan marker (the
lab's ``SendEnv``/``AcceptEnv``) and what ``SshSettings.pass_env`` names: the mock's address,
the model, the API key and an isolated ``HOME`` are set in the local environment (monkeypatch)
and carried to qwen over stdin, ahead of the protocol, never on any argv.

What qwen sends and what we answer is observed on the wire itself (``wire`` fixture, see
``integration/qwen_fixtures.py``), and the mock's request handler is wrapped to record the
``Authorization`` header of every request (the mock itself records bodies only), so the key the
remote qwen used is seen where it arrives.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from integration.qwen_fixtures import QUIET_SETTINGS, completed_messages, deltas, qwen_options
from remote_acp import (
    ErrorKind,
    Event,
    Notification,
    RemoteAcpError,
    SessionStarted,
    ToolResult,
    TurnCompleted,
    open_session,
)
from remote_acp.protocol.unattended import REFUSED_NOTICE
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support import openai_mock
from tests.support.openai_mock import TextReply, write_file_call
from tests.support.orphans import MARKER_NAME, find_marked
from tests.support.processes import cmdline, environ, pids
from tests.support.qwen import QWEN_VERSION, qwen_env, qwen_executable

if TYPE_CHECKING:
    from integration.qwen_fixtures import WireTap
    from integration.sshlab import SshLab
    from remote_acp import SessionOptions
    from tests.support.openai_mock import OpenAIMock

pytestmark = [pytest.mark.anyio, pytest.mark.qwen, pytest.mark.usefixtures("qwen_installed")]

HOST = "lab1"
#: What crosses ssh to qwen, by name: everything ``qwen_env`` sets for it.
CARRIED = (
    "HOME",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "NO_PROXY",
    "no_proxy",
    "QWEN_USAGE_STATISTICS_ENABLED",
    "QWEN_TELEMETRY_ENABLED",
    "NO_COLOR",
)
#: How long the far side may take to take qwen's tree down once the session ended: the local
#: ssh goes at once, the host's watchdog polls every second and gives SIGTERM ``kill_grace_s``
#: (3 s) before SIGKILL.
REMOTE_EXIT_BOUND_S = 10.0


# -- the mock's headers and the processes -------------------------------------------------------


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    authorization: str | None


@pytest.fixture(autouse=True)
def headers(monkeypatch: pytest.MonkeyPatch) -> list[SeenRequest]:
    """The method, path and ``Authorization`` header of every request the mock receives (autouse:
    set up ahead of every test's ``mock``)."""
    seen: list[SeenRequest] = []
    dispatch = openai_mock._Handler._dispatch

    def recording(self: openai_mock._Handler, method: str) -> None:
        seen.append(SeenRequest(method, self.path, self.headers.get("Authorization")))
        dispatch(self, method)

    monkeypatch.setattr(openai_mock._Handler, "_dispatch", recording)
    return seen


@dataclass(frozen=True)
class RemoteEnv:
    home: Path
    key: str


@pytest.fixture
def remote_env(tmp_path: Path, mock: OpenAIMock, monkeypatch: pytest.MonkeyPatch) -> RemoteEnv:
    """qwen's environment, set in the local one (for ``pass_env`` to carry), with a fresh fake key."""
    key = f"sk-remote-acp-ssh-{secrets.token_hex(12)}"
    env = qwen_env(tmp_path / "home", mock, extra_settings=QUIET_SETTINGS, api_key=key)
    for name in CARRIED:
        monkeypatch.setenv(name, env[name])
    return RemoteEnv(home=Path(env["HOME"]), key=key)


def ssh_options(approval_mode: str = "default") -> SessionOptions:
    """``qwen_options`` with a longer initialize floor: more time over ssh on a loaded machine."""
    return qwen_options(approval_mode, initialize_floor_ms=60_000)


def ssh_target(lab: SshLab, pass_env: tuple[str, ...] = CARRIED) -> SshTarget:
    return SshTarget(HOST, SshSettings(config_file=str(lab.config), pass_env=pass_env))


def qwen_processes(marker: str) -> list[int]:
    """Live processes carrying this test's marker that are node or whose argv names the pinned
    qwen: the ``node .../.bin/qwen`` launcher and the ``node --expose-gc .../cli.js`` it re-executes."""
    exe = qwen_executable()
    assert exe is not None
    launcher, package = str(exe).encode(), str(exe.resolve().parent).encode() + b"/"
    found = []
    for pid in find_marked(marker):
        # Whole argv words only: the ssh and sh processes carry the command inside their script.
        words = cmdline(pid).split(b"\0")
        if Path(words[0].decode(errors="replace")).name == "node" or any(
            word == launcher or word.startswith(package) for word in words
        ):
            found.append(pid)
    return found


async def assert_no_qwen_survives(marker: str) -> float:
    """Wait (bounded) for the far side to take qwen's tree down; return how long it took."""
    started = time.monotonic()
    while left := qwen_processes(marker):
        if time.monotonic() - started > REMOTE_EXIT_BOUND_S:
            described = {pid: cmdline(pid).replace(b"\0", b" ")[:160] for pid in left}
            pytest.fail(f"qwen outlived its ssh session by more than {REMOTE_EXIT_BOUND_S} s: {described}")
        await anyio.sleep(0.05)
    return time.monotonic() - started


# -- the tests --------------------------------------------------------------------------------


@pytest.mark.both_backends
async def test_handshake_and_streamed_turns_over_ssh(
    ssh_lab: SshLab, workspace: str, mock: OpenAIMock, remote_env: RemoteEnv
) -> None:
    marker = os.environ[MARKER_NAME]
    replies = [
        "The quick brown fox jumps over the lazy dog, over ssh.",
        "Second answer, streamed in several small pieces.",
        "Third and last reply of this remote session.",
    ]
    mock.enqueue(*(TextReply(text, chunk_size=8, chunk_delay=0.02) for text in replies))
    prompts = ["first question", "second question", "third question"]
    async with open_session(workspace, ssh_options(), ssh_target(ssh_lab)) as s:
        assert s.info is not None
        assert s.info.target == HOST
        assert (s.info.agent_name, s.info.agent_version) == ("qwen-code", QWEN_VERSION)
        assert s.session_id and s.pid is not None
        pid = s.pid
        # Our child is the local ssh; qwen runs under lab1's sshd, and carries our marker there.
        assert Path(cmdline(pid).split(b"\0")[0].decode()).name == "ssh"
        remote = qwen_processes(marker)
        assert remote, "no qwen process carrying this test's marker was found during the session"
        assert set(remote) <= set(ssh_lab.host(HOST).session_processes())
        for turn_number, (prompt, reply) in enumerate(zip(prompts, replies, strict=True)):
            events: list[Event] = []
            result = await s.run_turn(prompt, events.append)
            assert result.ok, result
            assert (result.outcome, result.stop_reason) == ("turn_completed", "end_turn")
            assert isinstance(events[0], SessionStarted)
            assert isinstance(events[-1], TurnCompleted)
            pieces = deltas(events)
            assert len([p for p in pieces if p]) >= 3, pieces  # streamed across ssh, not batched
            assert "".join(pieces) == reply
            # The first turn declares the session's capability gaps (qwen advertises session/load).
            notice = (
                ["this session started with a declared capability gap in: tool servers, token counts"]
                if turn_number == 0
                else []
            )
            assert completed_messages(events) == [*notice, reply]
            streamed = [i for i, e in enumerate(events) if isinstance(e, Notification) and e.delta]
            completed = [i for i, e in enumerate(events) if isinstance(e, Notification) and e.delta is None]
            assert completed[-1] > streamed[-1]  # the whole message comes after its chunks
            assert result.last_message == reply and s.last_message == reply
            assert all(e.session_id == s.session_id and e.pid == pid for e in events)
    turns = mock.turn_requests()
    assert len(turns) == 3 and all(r.stream for r in turns)
    for request, prompt in zip(turns, prompts, strict=True):
        assert prompt in request.last_user_text
    await assert_no_qwen_survives(marker)


async def test_environment_reaches_remote_qwen_only_over_stdin(
    ssh_lab: SshLab,
    workspace: str,
    mock: OpenAIMock,
    remote_env: RemoteEnv,
    headers: list[SeenRequest],
    wire: WireTap,
) -> None:
    marker, key = os.environ[MARKER_NAME], remote_env.key
    mock.enqueue(TextReply("the key worked", chunk_size=4))
    async with open_session(workspace, ssh_options(), ssh_target(ssh_lab)) as s:
        result = await s.run_turn("use the key")
        assert result.ok and result.last_message == "the key worked"
        session_id = s.session_id
        # While qwen is up: the key is on no process's argv (the local ssh and the remote sh
        # included), and the remote qwen has it, and the isolated HOME, in its environment.
        remote = qwen_processes(marker)
        assert remote
        scanned = pids()
        for pid in scanned:
            assert key.encode() not in cmdline(pid), f"the API key is on the argv of pid {pid}"
        assert len(scanned) > len(remote)
        lab = ssh_lab.host(HOST)
        for pid in remote:
            env = environ(pid)
            assert env.get("OPENAI_API_KEY") == key
            assert env.get("HOME") == str(remote_env.home)
            assert env.get("OPENAI_BASE_URL") == mock.base_url
            assert env.get(MARKER_NAME) == marker
            # It runs on the far side of ssh: sshd gave it the connection it came through.
            assert env.get("SSH_CONNECTION", "").split()[2:3] == [lab.address], env.get("SSH_CONNECTION")
    # The variables went down the ssh's stdin, in the session script ahead of the protocol (its
    # data line, octal-escaped), then the go-ahead...
    sent = bytes(wire.sent)
    at = sent.index(b'{"jsonrpc"')
    script, protocol = sent[:at], sent[at:]
    assert script.endswith(b"go\n") and b"\n_ra_data='" in script
    data = script.split(b"\n_ra_data='", 1)[1].split(b"'", 1)[0]
    decoded = re.sub(rb"\\0([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), data)
    assert key.encode() in decoded and str(remote_env.home).encode() in decoded
    assert key.encode() not in protocol
    assert json.loads(protocol.splitlines()[0])["method"] == "initialize"
    # ...and the remote qwen really used them: every model call carried the key...
    chats = [h for h in headers if h.method == "POST" and "/chat/completions" in h.path]
    assert len(chats) >= len(mock.turn_requests()) == 1
    assert {h.authorization for h in chats} == {f"Bearer {key}"}
    # ...and kept its state in the isolated HOME: the session's chat log, with our prompt.
    (log,) = (remote_env.home / ".qwen" / "projects").glob(f"*/chats/{session_id}.jsonl")
    assert "use the key" in log.read_text(encoding="utf-8")
    await assert_no_qwen_survives(marker)


async def test_api_key_not_named_in_pass_env_does_not_reach_qwen(
    ssh_lab: SshLab, workspace: str, mock: OpenAIMock, remote_env: RemoteEnv
) -> None:
    """The key is set locally, but only ``pass_env`` carries anything: qwen starts without it."""
    assert os.environ["OPENAI_API_KEY"] == remote_env.key
    without_key = tuple(name for name in CARRIED if name != "OPENAI_API_KEY")
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, ssh_options(), ssh_target(ssh_lab, without_key)):
            pytest.fail("the session started without a credential")
    err = info.value
    assert err.kind is ErrorKind.CREDENTIAL_UNVERIFIED, err
    text = str(err)
    assert "Missing API key" in text and "OPENAI_API_KEY" in text, text
    assert remote_env.key not in text
    assert not [r for r in mock.requests if r.kind in ("turn", "json", "background")]
    await assert_no_qwen_survives(os.environ[MARKER_NAME])


async def test_write_file_permission_is_refused_over_ssh(
    ssh_lab: SshLab, workspace: str, out_file: Path, mock: OpenAIMock, remote_env: RemoteEnv, wire: WireTap
) -> None:
    marker = os.environ[MARKER_NAME]
    mock.enqueue(write_file_call(str(out_file), "hello\n"))
    events: list[Event] = []
    async with open_session(workspace, ssh_options("default"), ssh_target(ssh_lab)) as s:
        with anyio.fail_after(45):  # a request left unanswered would hang the turn, not end it
            result = await s.run_turn("create out.txt saying hello", events.append)
        session_id = s.session_id
        # The session is still usable after the refusal.
        follow_up = await s.run_turn("are you still there?")
    assert result.ok and result.outcome == "turn_completed" and result.stop_reason == "end_turn"
    assert follow_up.ok and follow_up.last_message == "Default reply from the mock."
    assert not await anyio.Path(out_file).exists()

    notices = [e for e in events if isinstance(e, Notification) and e.message == REFUSED_NOTICE]
    assert len(notices) == 1
    (tool,) = [e for e in events if isinstance(e, ToolResult)]
    assert (tool.tool_name, tool.error) == ("edit", True)
    assert events.index(notices[0]) < events.index(tool)
    assert isinstance(events[-1], TurnCompleted)

    # On the wire, through ssh: qwen asked once, offering a reject_once option, and we picked it.
    (asked,) = wire.their_requests("session/request_permission")
    assert asked["params"]["sessionId"] == session_id
    assert asked["params"]["toolCall"]["toolCallId"] == tool.tool_call_id
    assert {"optionId": "cancel", "name": "Reject", "kind": "reject_once"} in asked["params"]["options"]
    answer = wire.our_answer(asked["id"])
    assert answer == {
        "jsonrpc": "2.0",
        "id": asked["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "cancel"}},
    }
    # The write was the first turn's only model step; the follow-up made one more.
    assert len(mock.turn_requests()) == 2
    await assert_no_qwen_survives(marker)


async def test_short_carried_values_leave_the_stderr_report_readable(
    ssh_lab: SshLab, tmp_path: Path, remote_env: RemoteEnv
) -> None:
    assert os.environ["NO_COLOR"] == "1" and "NO_COLOR" in CARRIED
    missing = tmp_path / "ws-2024-11-01-missing"
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(str(missing), ssh_options(), ssh_target(ssh_lab)):
            pytest.fail("the session started in a workspace that does not exist")
    err = info.value
    assert err.kind is ErrorKind.INVALID_WORKSPACE_CWD
    assert remote_env.key not in str(err)
    # The far side's own message names the path; no secret is in it, so it must arrive intact.
    assert str(missing) in err.detail, err.detail

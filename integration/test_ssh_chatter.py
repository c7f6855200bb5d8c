"""ssh's own chatter stays out of what a person reads: warnings, error messages and details.

The session's ssh runs at ``LogLevel VERBOSE`` so that its reasons for a failure reach us; on
every connection it also says ``Authenticated to ...``, ``Transferred: sent ...``, ``Bytes per
second: ...`` and, for a new host key, ``Warning: Permanently added ...``. The readers of ssh's
end still see those lines (a login that happened is told apart from one that did not), but a
failed start logs none of them and its error holds none; ssh's reasons stay.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import pytest

from integration.sshlab import keygen
from remote_acp import ErrorKind, RemoteAcpError, SessionOptions, SshSettings, SshTarget, open_session
from remote_acp.fleet.check import handshake_judgement
from remote_acp.targets.ssh.errors import is_ssh_chatter
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from pathlib import Path

    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio

BOUNDS = {"read_timeout_ms": 5_000, "initialize_floor_ms": 30_000, "stop_grace_ms": 1_000}
CHATTER = ("Authenticated to", "Transferred:", "Bytes per second", "Permanently added")


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_ACP_CACHE_DIR", str(tmp_path / "cache"))


async def failed_start(
    target: SshTarget, options: SessionOptions, caplog: pytest.LogCaptureFixture
) -> tuple[RemoteAcpError, list[str]]:
    caplog.set_level(logging.DEBUG, logger="remote_acp")
    with anyio.fail_after(60), pytest.raises(RemoteAcpError) as info:
        async with open_session("/tmp", options, target=target):
            pass
    return info.value, [record.getMessage() for record in caplog.records]


def said_nothing_of_chatter(error: RemoteAcpError, logged: list[str]) -> None:
    """Nowhere: the error, the lines logged, nor the verdict ``check host`` gives."""
    judgement = handshake_judgement(error)
    texts = [str(error), error.message, error.detail, judgement.message, judgement.fix or "", *logged]
    assert not [text for text in texts if any(words in text for words in CHATTER)], texts


async def test_an_agent_that_exits_after_the_login_logs_its_own_lines_and_no_chatter(
    ssh_lab: SshLab, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A fresh known_hosts: ssh also says it added the host's key.
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=empty)
    options = fast_options(
        scripted("--crash-at", "initialize", "--exit-code", "3", "--stderr", "fatal: no key"), **BOUNDS
    )
    error, logged = await failed_start(SshTarget("lab1", SshSettings(config_file=str(config))), options, caplog)
    assert error.kind is ErrorKind.PORT_EXIT
    assert "fatal: no key" in error.detail
    assert "agent stderr: fatal: no key" in logged
    said_nothing_of_chatter(error, logged)


async def test_a_refused_login_keeps_ssh_reason_and_no_chatter(
    ssh_lab: SshLab, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stranger = tmp_path / "stranger"
    keygen(stranger)
    config = ssh_lab.config_variant(tmp_path / "cfg", identity=stranger)
    options = fast_options(scripted(), **BOUNDS)
    error, logged = await failed_start(SshTarget("lab1", SshSettings(config_file=str(config))), options, caplog)
    assert error.kind is ErrorKind.PORT_EXIT and not error.retryable
    assert "Permission denied" in str(error)
    assert any("Permission denied" in line for line in logged)
    said_nothing_of_chatter(error, logged)


async def test_a_refused_login_to_a_new_host_keeps_ssh_reason_and_no_chatter(
    ssh_lab: SshLab, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stranger = tmp_path / "stranger"
    keygen(stranger)
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = ssh_lab.config_variant(tmp_path / "cfg", known_hosts=empty, identity=stranger)
    error, logged = await failed_start(
        SshTarget("lab1", SshSettings(config_file=str(config))), fast_options(scripted(), **BOUNDS), caplog
    )
    assert "Permission denied" in str(error)
    said_nothing_of_chatter(error, logged)


async def test_a_missing_workspace_after_the_login_says_so_without_chatter(
    ssh_lab: SshLab, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="remote_acp")
    target = SshTarget("lab1", SshSettings(config_file=str(ssh_lab.config)))
    with anyio.fail_after(60), pytest.raises(RemoteAcpError) as info:
        async with open_session("/nonexistent/workspace", fast_options(scripted(), **BOUNDS), target=target):
            pass
    error = info.value
    assert error.kind is ErrorKind.INVALID_WORKSPACE_CWD
    assert "/nonexistent/workspace" in error.detail
    said_nothing_of_chatter(error, [record.getMessage() for record in caplog.records])


async def test_a_refused_connection_keeps_ssh_reason(ssh_lab: SshLab, caplog: pytest.LogCaptureFixture) -> None:
    target = SshTarget("root@127.0.0.2:9", SshSettings(config_file=str(ssh_lab.config)))
    error, logged = await failed_start(target, fast_options(scripted(), **BOUNDS), caplog)
    assert error.kind is ErrorKind.PORT_EXIT and error.retryable
    assert "Connection refused" in str(error)
    said_nothing_of_chatter(error, logged)


def test_the_chatter_lines() -> None:
    assert is_ssh_chatter('Authenticated to lab1 ([127.0.0.2]:2201) using "publickey".')
    assert is_ssh_chatter("Transferred: sent 2904, received 2744 bytes, in 0.1 seconds")
    assert is_ssh_chatter("Bytes per second: sent 31221.5, received 29501.4")
    assert is_ssh_chatter("Warning: Permanently added '[127.0.0.2]:2201' (ED25519) to the list of known hosts.")
    assert not is_ssh_chatter("root@127.0.0.2: Permission denied (publickey).")
    assert not is_ssh_chatter("ssh: connect to host 127.0.0.2 port 9: Connection refused")
    assert not is_ssh_chatter("fatal: no key")

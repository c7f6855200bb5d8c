"""A session with a reattach window that fails says why, as one without a window does: the agent's
last words on stderr come back before the relay's end report (each line marked as the agent's),
and the relay's own lines are never given as the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp import RemoteAcpError, open_session
from remote_acp.errors import Cause, ErrorKind
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options

if TYPE_CHECKING:
    from integration.sshlab import SshLab

pytestmark = pytest.mark.anyio


async def failed_start(lab: SshLab, command: list[str]) -> RemoteAcpError:
    settings = SshSettings(config_file=str(lab.config), reattach_window_s=30)
    with anyio.fail_after(30), pytest.raises(RemoteAcpError) as caught:
        async with open_session("/tmp", fast_options(command), target=SshTarget("lab1", settings)):
            pass
    return caught.value


async def test_an_agent_that_exits_at_start_is_reported_with_its_last_words(ssh_lab: SshLab) -> None:
    error = await failed_start(ssh_lab, ["sh", "-c", "echo 'Error: no API key set' >&2; exit 3"])
    assert (error.kind, error.cause) == (ErrorKind.PORT_EXIT, Cause.AGENT_EXITED), error
    assert str(error).endswith("exit status 3: agent: Error: no API key set"), error
    assert "RA-" not in str(error) and "RA-" not in (error.detail or "")


async def test_an_agent_command_the_host_lacks_is_not_found_and_says_so_in_the_shells_words(ssh_lab: SshLab) -> None:
    error = await failed_start(ssh_lab, ["no-such-agent-on-this-host"])
    assert (error.kind, error.cause) == (ErrorKind.PORT_EXIT, Cause.AGENT_NOT_FOUND), error
    assert "no-such-agent-on-this-host: not found" in str(error), error
    assert "RA-" not in str(error)

"""A reattach window's first connection meeting a host that does not speak the relay's protocol:
the start fails within its bounds with the cause that says why, and what the host printed is
shown escaped and bounded. The "host" is a real local shell standing where ssh would run."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from remote_acp import RemoteAcpError, open_session
from remote_acp.errors import Cause, ErrorKind
from remote_acp.targets.launch import LaunchSpec
from remote_acp.targets.ssh.ready_marker import ReadyMarker
from remote_acp.targets.ssh.relay.start import EXIT_BAD_START, EXIT_NO_WINDOW
from remote_acp.targets.ssh.relay_starter import RelayStarter
from remote_acp.targets.ssh.relink import Relink
from remote_acp.targets.ssh.script import EXIT_AT_CAPACITY, EXIT_NO_SLOTS
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    from collections.abc import Sequence

    from remote_acp.targets.exit_status import ExitStatus

pytestmark = [pytest.mark.anyio, pytest.mark.process]

MARK = b"remote-acp-ready-test"
# What every fake host does first: the marker, then the go-ahead and the start request are read.
GREETING = f"printf '%s\\n' {MARK.decode()}; read -r go; read -r request; "


@dataclass(frozen=True)
class FakeHost:
    """A launch target whose "ssh" is ``sh -c script`` on this machine."""

    script: str

    @property
    def label(self) -> str:
        return "fakehost"

    @property
    def remote(self) -> bool:
        return True

    async def prepare(self, command: str | Sequence[str], workspace: str) -> LaunchSpec:
        marker = ReadyMarker(opening=b"", marker=MARK, reply=b"go\n", bound_ms=5_000)
        spec = LaunchSpec(
            argv=["/bin/sh", "-c", self.script],
            env=dict(os.environ),
            cwd=None,
            target="fakehost",
            remote=True,
            prelude=marker,
        )
        relink = Relink(
            spec=spec,
            marker=MARK,
            go_ahead=b"go\n",
            window_s=5,
            destination="fakehost",
            config_file=None,
            attempt_s=2.0,
            host="fakehost",
        )
        return LaunchSpec(
            argv=spec.argv,
            env=spec.env,
            cwd=None,
            target="fakehost",
            remote=True,
            prelude=marker,
            starter=RelayStarter(relink),
        )

    def start_slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    def exit_error(
        self, status: ExitStatus, *, agent_wrote: bool, stderr: str, ready: bool | None = None
    ) -> RemoteAcpError | None:
        return None


async def start_error(script: str) -> RemoteAcpError:
    options = fast_options(scripted(), read_timeout_ms=3_000, initialize_floor_ms=3_000)
    with pytest.raises(RemoteAcpError) as caught:
        async with open_session("/tmp", options, target=FakeHost(GREETING + script)):
            pass
    return caught.value


async def test_a_host_that_answers_something_else_is_a_protocol_violation_shown_escaped() -> None:
    error = await start_error(r"printf 'HELLO \033[31mred\007 I am no relay\n'; sleep 30")
    assert (error.kind, error.cause) == (ErrorKind.PORT_EXIT, Cause.PROTOCOL_VIOLATION)
    assert "the host's relay answered 'HELLO ?[31mred? I am no relay'" in error.message
    assert "\033" not in str(error) and "\007" not in str(error)


async def test_a_host_that_never_ends_its_header_line_is_refused_at_the_bound() -> None:
    error = await start_error("head -c 100000 /dev/zero | tr '\\0' x; sleep 30")
    assert (error.kind, error.cause) == (ErrorKind.PORT_EXIT, Cause.PROTOCOL_VIOLATION)
    assert "the host sent no relay header" in error.message


@pytest.mark.parametrize(
    ("code", "cause", "says"),
    [
        (EXIT_NO_WINDOW, Cause.NO_REATTACH_WINDOW, "this host ends what a login leaves behind"),
        (EXIT_AT_CAPACITY, Cause.AT_CAPACITY, "the host is at capacity"),
        (EXIT_NO_SLOTS, Cause.SLOTS_UNUSABLE, "the agent slots directory is not usable"),
        (EXIT_BAD_START, Cause.PROTOCOL_VIOLATION, "the host refused to start the session"),
    ],
)
async def test_a_start_refused_by_the_host_says_why(code: int, cause: Cause, says: str) -> None:
    error = await start_error(f"printf 'RA-REFUSED why\\n'; exit {code}")
    assert (error.kind, error.cause) == (ErrorKind.PORT_EXIT, cause)
    assert says in error.message and error.facts.exit_status == code


async def test_a_host_whose_connection_ends_before_the_relay_answers_fails_the_start() -> None:
    error = await start_error("exit 255")
    assert error.kind is ErrorKind.PORT_EXIT
    assert error.facts.exit_status == 255

"""A launched side that must say it is ready before the protocol starts (a remote login).

A small local shell script stands in for the remote side: it prints what login scripts print,
reads the prefix, prints the ready marker, waits for the go-ahead and only then starts the agent.
Nothing but the prefix may reach it before the marker, and when the marker never comes the start
fails within its own bound with a message that names the likely cause.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import anyio
import pytest

from remote_acp import ErrorKind, Event, LaunchSpec, LocalTarget, RemoteAcpError, open_session
from remote_acp.targets.ssh.ready_marker import GATED_OUTPUT_KEPT, ReadyMarker
from tests.support.agents import fast_options
from tests.support.processes import gone_within

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from remote_acp.targets.exit_status import ExitStatus

pytestmark = pytest.mark.anyio

MARKER = b"remote-acp-ready-5f0c"
AGENT = f"exec {sys.executable} -m remote_acp.testing.scripted_agent"


@dataclass(frozen=True)
class ScriptTarget:
    """A local target whose launched side is a shell script speaking the ready protocol."""

    script: str
    ready_timeout_ms: int = 3_000
    local: LocalTarget = LocalTarget()
    gate: Callable[[bytes], RemoteAcpError | None] | None = None

    @property
    def label(self) -> str:
        return "script"

    @property
    def remote(self) -> bool:
        return False

    def start_slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self.local.start_slot()

    def exit_error(
        self, status: ExitStatus, *, agent_wrote: bool, stderr: str, ready: bool | None = None
    ) -> RemoteAcpError | None:
        return None

    async def prepare(self, command: str | Sequence[str], workspace: str) -> LaunchSpec:
        spec = await self.local.prepare(command, workspace)
        return replace(
            spec,
            argv=["/bin/sh", "-c", self.script],
            prelude=ReadyMarker(
                opening=b"the-prefix\n", marker=MARKER, reply=b"go\n", bound_ms=self.ready_timeout_ms, gate=self.gate
            ),
        )


def script(before_marker: str, tmp_path: Path) -> str:
    return (
        f"echo 'Welcome to build-7 (motd)'; {before_marker}\n"
        f'read -r prefix; echo "$prefix" > {tmp_path}/prefix\n'
        f"printf '%s\\n' {MARKER.decode()}\n"
        f'read -r go; echo "$go" > {tmp_path}/go; [ "$go" = go ] || exit 9\n'
        f"echo started > {tmp_path}/started\n{AGENT}\n"
    )


async def test_the_protocol_starts_after_the_marker_and_login_noise_is_not_protocol(
    workspace: str, tmp_path: Path
) -> None:
    target = ScriptTarget(script('echo \'{"not": "protocol"}\'', tmp_path))
    async with open_session(workspace, fast_options("true"), target) as s:
        events: list[Event] = []
        result = await s.run_turn("hello", events.append)
    assert result.ok and result.last_message == "hello"
    assert (tmp_path / "prefix").read_text() == "the-prefix\n"
    assert (tmp_path / "go").read_text() == "go\n"
    assert not any(type(e).__name__ == "Malformed" for e in events)  # the noise was never parsed


async def test_a_login_script_that_reads_stdin_fails_fast_and_says_why(workspace: str, tmp_path: Path) -> None:
    # Like a .bashrc that reads standard input: it waits for more than the prefix, which never
    # comes, because nothing else is written before the marker.
    target = ScriptTarget(script("echo 'reading a line'; read -r a; read -r b", tmp_path), ready_timeout_ms=800)
    started = time.monotonic()
    with anyio.fail_after(10), pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options("true", initialize_floor_ms=60_000), target):
            pass
    assert time.monotonic() - started < 8  # the marker's bound, not initialize's 60 s
    err = info.value
    assert err.kind is ErrorKind.RESPONSE_TIMEOUT and not err.retryable
    assert err.message.startswith("the remote side did not say it was ready within 800 ms: a login that hangs")
    assert "reads standard input" in err.message
    assert err.detail == "it printed: Welcome to build-7 (motd)\\nreading a line"
    assert not (tmp_path / "started").exists()


async def test_nothing_starts_for_a_session_given_up_during_a_hanging_login(workspace: str, tmp_path: Path) -> None:
    # The login hangs (the sleep), then would start the agent: only its end can stop that.
    pid_file = tmp_path / "login"
    target = ScriptTarget(f"echo $$ > {pid_file}; " + script("sleep 2", tmp_path), ready_timeout_ms=500)
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options("true"), target):
            pass
    assert info.value.kind is ErrorKind.RESPONSE_TIMEOUT
    pid = pid_file.read_text().strip() if pid_file.exists() else ""
    if pid:  # else it was ended before it got that far (and the orphan check sees any survivor)
        assert await gone_within([int(pid)], 10), "the hanging login outlived the session given up on it"
    assert not (tmp_path / "started").exists()


async def test_a_side_that_ends_before_the_marker_is_reported_with_its_exit(workspace: str, tmp_path: Path) -> None:
    target = ScriptTarget("echo 'Permission denied (publickey).' >&2; exit 255")
    with pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options("true"), target):
            pass
    assert info.value.kind is ErrorKind.PORT_EXIT
    assert "exit status 255" in str(info.value) and "Permission denied (publickey)." in str(info.value)


async def test_a_marker_split_across_reads_is_found(workspace: str, tmp_path: Path) -> None:
    split = (  # the pause is what splits the marker across two reads
        f"read -r prefix; printf 'noise '; printf 'remote-acp-re'; sleep 0.2; printf 'ady-5f0c\\n'; read -r go; {AGENT}"
    )
    async with open_session(workspace, fast_options("true"), ScriptTarget(split)) as s:
        assert (await s.run_turn("hi")).ok


async def test_a_gate_reads_what_came_before_the_marker_and_lets_the_agent_start(
    workspace: str, tmp_path: Path
) -> None:
    seen: list[bytes] = []

    def gate(printed: bytes) -> RemoteAcpError | None:
        seen.append(printed)
        return None

    target = ScriptTarget(script("echo 'report: load=0.1'", tmp_path), gate=gate)
    async with open_session(workspace, fast_options("true"), target) as s:
        assert (await s.run_turn("hello")).last_message == "hello"
    assert seen == [b"Welcome to build-7 (motd)\nreport: load=0.1\n"]
    assert (tmp_path / "go").read_text() == "go\n"


async def test_a_gate_that_refuses_fails_the_start_with_its_error_and_nothing_starts(
    workspace: str, tmp_path: Path
) -> None:
    refusal = RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "the report says no agent here")
    target = ScriptTarget(script("echo 'report: agent=missing'", tmp_path), gate=lambda _: refusal)
    started = time.monotonic()
    with anyio.fail_after(10), pytest.raises(RemoteAcpError) as info:
        async with open_session(workspace, fast_options("true", initialize_floor_ms=60_000), target):
            pass
    assert time.monotonic() - started < 8  # at once, not after initialize's 60 s
    assert info.value is refusal
    # No go-ahead: the end of its input, if teardown let it read that far (and a file the shell
    # had only created, not written yet, when teardown ended it).
    go = tmp_path / "go"
    assert not go.exists() or go.read_text() in ("", "\n")
    assert not (tmp_path / "started").exists()


async def test_a_gate_sees_a_bounded_tail_of_a_flood_before_the_marker(workspace: str, tmp_path: Path) -> None:
    seen: list[bytes] = []

    def gate(printed: bytes) -> RemoteAcpError | None:
        seen.append(printed)
        return RemoteAcpError(ErrorKind.PORT_EXIT, "refused")

    flood = "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo 'the report'"
    with pytest.raises(RemoteAcpError, match="refused"):
        async with open_session(workspace, fast_options("true"), ScriptTarget(script(flood, tmp_path), gate=gate)):
            pass
    (printed,) = seen
    assert len(printed) == GATED_OUTPUT_KEPT and printed.endswith(b"xxx\nthe report\n")
    assert not (tmp_path / "started").exists()

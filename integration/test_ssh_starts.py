"""The per-host start limit against a real sshd that refuses handshakes beyond ``MaxStartups``.

The host here allows two handshakes in progress (``MaxStartups 2:100:2``: from two
unauthenticated connections on, every new one is dropped). Six sessions started at once all
succeed when starts are limited to two per host, and at least one fails with ``port_exit``
when they are not (the control that shows the limit is what made the difference).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from integration.sshlab import SshLab
from remote_acp import ErrorKind, RemoteAcpError, SessionOptions, open_session
from remote_acp.errors import Cause
from remote_acp.targets.ssh.settings import SshSettings
from remote_acp.targets.ssh.target import SshTarget
from tests.support.agents import fast_options, scripted

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Iterator, Sequence

    from remote_acp.targets.exit_status import ExitStatus
    from remote_acp.targets.launch import LaunchSpec

pytestmark = pytest.mark.anyio

SESSIONS = 6
OPTIONS: SessionOptions = fast_options(
    scripted(), read_timeout_ms=10_000, initialize_floor_ms=30_000, stop_grace_ms=1_000
)


@pytest.fixture(scope="module")
def strict_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    lab = SshLab(Path(tmp_path_factory.mktemp("strict-sshlab")))
    try:
        yield lab.start(1, namespaced=False, max_startups="2:100:2")
    finally:
        lab.stop()


class Counted:
    """An SshTarget that counts how often the session held its start slot."""

    def __init__(self, inner: SshTarget) -> None:
        self.inner = inner
        self.slots = 0

    @property
    def label(self) -> str:
        return self.inner.label

    @property
    def remote(self) -> bool:
        return self.inner.remote

    async def prepare(self, command: str | Sequence[str], workspace: str) -> LaunchSpec:
        return await self.inner.prepare(command, workspace)

    def start_slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        self.slots += 1
        return self.inner.start_slot()

    def exit_error(
        self, status: ExitStatus, *, agent_wrote: bool, stderr: str, ready: bool | None = None
    ) -> RemoteAcpError | None:
        return self.inner.exit_error(status, agent_wrote=agent_wrote, stderr=stderr, ready=ready)

    def ready_error(self, bound_ms: int, *, stderr: str, printed: str) -> RemoteAcpError | None:
        return self.inner.ready_error(bound_ms, stderr=stderr, printed=printed)


async def start_many(lab: SshLab, limit: int) -> list[RemoteAcpError | None]:
    """Start SESSIONS sessions at once (each runs one turn); what each start ended with."""
    outcomes: list[RemoteAcpError | None] = [None] * SESSIONS
    ready = anyio.Event()
    waiting = 0

    async def one(index: int) -> None:
        nonlocal waiting
        target = SshTarget("lab1", SshSettings(config_file=str(lab.config), max_concurrent_starts=limit))
        waiting += 1
        if waiting == SESSIONS:
            ready.set()
        await ready.wait()  # every session starts at the same moment
        try:
            async with open_session("/tmp", OPTIONS, target=target) as session:
                assert (await session.run_turn(f"hello {index}")).ok
        except RemoteAcpError as exc:
            outcomes[index] = exc

    async with anyio.create_task_group() as tg:
        for index in range(SESSIONS):
            tg.start_soon(one, index)
    return outcomes


async def test_a_session_holds_its_targets_start_slot(strict_lab: SshLab) -> None:
    counted = Counted(SshTarget("lab1", SshSettings(config_file=str(strict_lab.config))))
    async with open_session("/tmp", OPTIONS, target=counted) as session:
        assert counted.slots == 1
        assert (await session.run_turn("hi")).ok
    assert counted.slots == 1


async def test_starts_limited_per_host_all_succeed(strict_lab: SshLab) -> None:
    outcomes = await start_many(strict_lab, 2)
    assert outcomes == [None] * SESSIONS


async def test_without_the_limit_the_host_refuses_some(strict_lab: SshLab) -> None:
    outcomes = await start_many(strict_lab, 100)
    failed = [error for error in outcomes if error is not None]
    assert failed, "sshd admitted every handshake: this host does not show the limit's effect"
    for error in failed:
        # sshd dropped it before the login (MaxStartups): a connection failure a retry can mend.
        assert (error.kind, error.cause, error.retryable) == (ErrorKind.PORT_EXIT, Cause.CONNECT_FAILED, True), error

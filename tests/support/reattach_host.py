"""What the reattach-window tests over real ssh (integration/test_reattach*.py) see of a session.

On the host (the lab's hosts are this machine): :class:`HostSession` finds a session's relay by
what it runs (``sh -c TEXT ra-relay DIR ID ...``, :mod:`remote_acp.targets.ssh.relay.start`), so
the tests learn its directory and its slot from the host itself rather than from the library's
own conventions; the agent and what it started carry ``_RA_SESSION=ID.`` in their environment.
Here: the local ``ssh`` processes a session runs (descendants of this process, through the
supervisors its launcher forks), and the events and chunks of a turn (``@drip``'s
``chunk-NNNN ``).

Every wait has a deadline and says what it waited for.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from remote_acp import LinkLost, LinkRestored, Notification, RemoteAcpError
from tests.support.agent_scripts import SCRIPTED_AGENT_MODULE, SYSTEM_PYTHON
from tests.support.processes import alive, cmdline, marked, parent_of, pids

if TYPE_CHECKING:
    from collections.abc import Callable

    from remote_acp import Event

__all__ = [
    "CHUNK",
    "HostSession",
    "TurnLog",
    "assert_refused",
    "descendants",
    "kill_link_ssh",
    "local_ssh",
    "ssh_of",
    "user_agent",
    "wait_until",
]

CHUNK = re.compile(r"chunk-(\d{4,}) ")
"""A chunk of the scripted agent's ``@drip``."""


async def wait_until(condition: Callable[[], bool], what: str, *, within: float) -> None:
    """Wait until ``condition()`` holds (something observable); after ``within`` seconds, fail
    saying ``what`` was waited for."""
    deadline = time.monotonic() + within
    while not condition():  # what is observed has no event of its own
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {within} s for {what}")
        await anyio.sleep(0.02)


# -- local processes ------------------------------------------------------------------------------


def descendants(root: int) -> list[int]:
    """The live descendants of ``root`` now (one walk of ``/proc``)."""
    parents = {pid: parent_of(pid) for pid in pids()}
    found: list[int] = []
    for pid in parents:
        at: int | None = pid
        for _ in range(64):
            at = parents.get(at) if at is not None else None
            if at is None or at <= 1:
                break
            if at == root:
                if alive(pid):
                    found.append(pid)
                break
    return found


def ssh_of(root: int) -> list[int]:
    """The ``ssh`` clients among ``root``'s descendants (not the lab's ``sshd``)."""
    return [pid for pid in descendants(root) if os.path.basename(cmdline(pid).split(b"\0")[0]) == b"ssh"]


def local_ssh() -> list[int]:
    """The ``ssh`` clients this test process runs now (a session's current link among them)."""
    return ssh_of(os.getpid())


async def kill_link_ssh(within: float = 10.0) -> int:
    """SIGKILL the one ``ssh`` this process runs (waiting, bounded, until there is exactly one:
    a reconnect may still be retiring the one before); its pid."""
    found: list[int] = []

    def one() -> bool:
        found[:] = local_ssh()
        return len(found) == 1

    await wait_until(one, "exactly one local ssh", within=within)
    os.kill(found[0], signal.SIGKILL)
    return found[0]


def user_agent(pythonpath: Path) -> tuple[list[str], dict[str, str]]:
    """The scripted agent as a lab's throwaway user runs it (the system's python, our packages on
    ``PYTHONPATH``: see :mod:`tests.support.agent_scripts`), and the environment that carries
    ``PYTHONPATH`` (give the target ``pass_env=("PYTHONPATH",)``)."""
    assert SYSTEM_PYTHON is not None, "no system python3"
    return [SYSTEM_PYTHON, "-m", SCRIPTED_AGENT_MODULE], {**os.environ, "PYTHONPATH": str(pythonpath)}


# -- the host's side ------------------------------------------------------------------------------


@dataclass
class HostSession:
    """A reattachable session as its host holds it: its relay, directory and slot."""

    relay_id: str
    relay: int
    directory: Path
    slot: Path | None
    """The slot file the relay holds locked (descriptor 9), when the session took one."""

    @classmethod
    async def find(cls, relay_id: str, *, within: float = 10.0) -> HostSession:
        """The session ``relay_id`` names, once its relay runs."""
        found: list[HostSession] = []

        def look() -> bool:
            session = cls._look(relay_id)
            if session is not None:
                found.append(session)
            return session is not None

        await wait_until(look, f"the relay of session {relay_id}", within=within)
        return found[-1]

    @classmethod
    def _look(cls, relay_id: str) -> HostSession | None:
        for pid in pids():
            words = cmdline(pid).split(b"\0")
            if b"ra-relay" not in words[:4]:
                continue
            at = words.index(b"ra-relay")
            if words[at + 2 : at + 3] != [relay_id.encode()]:
                continue
            slot: Path | None = None
            with contextlib.suppress(OSError):
                held = Path(os.readlink(f"/proc/{pid}/fd/9"))
                slot = held if held.name.startswith("slot-") else None
            return cls(relay_id, pid, Path(os.fsdecode(words[at + 1])), slot)
        return None

    @property
    def marked(self) -> list[int]:
        """The live processes carrying the session's mark: the agent and what it started."""
        return marked(f"_RA_SESSION={self.relay_id}.")

    @property
    def agent(self) -> int:
        """The agent (the relay's marked descendant that runs python)."""
        agents = [pid for pid in self.marked if b"python" in os.path.basename(cmdline(pid).split(b"\0")[0])]
        assert len(agents) == 1, f"expected one agent of session {self.relay_id}, found {agents}"
        return agents[0]

    def attachments(self) -> list[int]:
        """The processes of the connections attached now: those that hold the session's
        ``attach.lock`` open, but the relay (which locks it only for a moment, to look)."""
        lock = str(self.directory / "attach.lock")
        found = []
        for pid in pids():
            with contextlib.suppress(OSError):
                fds = os.listdir(f"/proc/{pid}/fd")
                if pid != self.relay and any(_link(f"/proc/{pid}/fd/{fd}") == lock for fd in fds):
                    found.append(pid)
        return found

    def slot_free(self) -> bool:
        """Whether the slot the session held can be locked (``True`` when it held none)."""
        if self.slot is None:
            return True
        fd = os.open(self.slot, os.O_WRONLY | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    def disk_bytes(self) -> int:
        """What the session's directory holds now: its files' sizes (0 once it is gone)."""
        total = 0
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.directory):
                with contextlib.suppress(FileNotFoundError):
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        return total

    def running(self) -> bool:
        """The relay and the agent alive, the directory there."""
        return alive(self.relay) and bool(self.marked) and self.directory.is_dir()

    def leftovers(self) -> list[str]:
        """What is left of the session on the host (empty: nothing)."""
        left = []
        if alive(self.relay):
            left.append(f"relay {self.relay}")
        left += [f"marked process {pid}: {cmdline(pid)[:80]!r}" for pid in self.marked]
        if self.directory.exists():
            left.append(f"directory {self.directory}")
        if not self.slot_free():
            left.append(f"slot {self.slot} held")
        return left

    async def gone(self, *, within: float) -> None:
        """Wait until nothing of the session is left on the host."""
        deadline = time.monotonic() + within
        while left := self.leftovers():
            if time.monotonic() > deadline:
                raise AssertionError(f"after {within} s the host still holds session {self.relay_id}: {left}")
            await anyio.sleep(0.1)


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


# -- a turn as the caller saw it ------------------------------------------------------------------


@dataclass
class TurnLog:
    """The events of a turn, kept as they come (a turn's ``on_event``)."""

    events: list[Event] = field(default_factory=list)
    chunks: list[int] = field(default_factory=list)
    """The numbers of ``@drip``'s chunks, in arrival order."""
    text: list[str] = field(default_factory=list)
    """Every text delta, in arrival order."""

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, Notification) and event.delta is not None:
            self.text.append(event.delta)
            if match := CHUNK.fullmatch(event.delta):
                self.chunks.append(int(match[1]))

    @property
    def link_events(self) -> list[str]:
        return [event.type for event in self.events if isinstance(event, LinkLost | LinkRestored)]

    @property
    def restored(self) -> int:
        return sum(isinstance(event, LinkRestored) for event in self.events)

    async def until(self, count: int, *, within: float) -> None:
        """Wait until ``count`` chunks came."""
        await wait_until(
            lambda: len(self.chunks) >= count, f"{count} chunks (have {self.chunks[-3:]}...)", within=within
        )

    async def until_restored(self, count: int, *, within: float) -> None:
        """Wait until the link came back ``count`` times."""
        await wait_until(lambda: self.restored >= count, f"the link restored {count} times", within=within)


def assert_refused(error: BaseException, cause: str, message: str, *, kind: str = "port_exit") -> RemoteAcpError:
    """``error`` is the library's, of that kind, with that cause and message (the start of it: a
    detail may follow)."""
    assert isinstance(error, RemoteAcpError), repr(error)
    assert (error.kind.value, error.cause.value) == (kind, cause), (error.kind, error.cause, str(error))
    assert error.message.startswith(message), error.message
    return error

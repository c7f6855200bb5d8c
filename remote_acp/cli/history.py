"""Recent sessions of the CLI, so a later run can continue one (``run --resume``).

One JSON object per line in ``sessions.jsonl`` under the platformdirs user state directory
(``REMOTE_ACP_STATE_DIR`` overrides it). Lines are ASCII (every other character is escaped, a
lone surrogate from an agent's session id included), and each is appended whole in one write.
Appending and compaction (rewriting the file with its latest records once it grows past a bound)
both hold an exclusive ``flock`` on ``sessions.lock`` beside it, so concurrent runs neither
interleave nor lose a line a compaction would otherwise overwrite; waiting for that lock is
bounded. Readers take no lock: a compaction replaces the file atomically, and a line that cannot
be decoded or parsed (a torn or foreign line) is skipped.

Each record carries the session's creation time when it is known, written with the rest of the
record under the lock, so a run in another process can space its load of the session as the
creating process would have (see :class:`remote_acp.session.continuation.OriginLedger`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final

from hostinv.keep import untrusted

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = ["HistoryError", "SessionHistory", "SessionRecord", "default_state_dir"]

_KEEP: Final = 500
"""Records a compaction keeps; it runs once the file holds twice as many."""
_LOCK_WAIT_S: Final = 5.0
_LOCK_POLL_S: Final = 0.02


class HistoryError(Exception):
    """The session history could not be read or written (the message names the file and why)."""


def default_state_dir() -> Path:
    """``$REMOTE_ACP_STATE_DIR``, else the platformdirs user state directory (see
    :mod:`remote_acp.paths`)."""
    # Seam: the lookup of the state directory (platformdirs, about 4 ms) loads when the history is
    # first used: a run records its session once the agent has run, not on the way to it.
    from ..paths import state_root

    return state_root()


@dataclass(frozen=True, slots=True)
class SessionRecord:
    session_id: str
    agent: str
    target: str
    workspace: str
    when: str
    """When the run started, ISO 8601 UTC."""
    outcome: str
    error_kind: str | None = None
    obtained: str = "new"
    created: str | None = None
    """When the agent created the session (its answer to ``session/new``, as this or an earlier
    run saw it), ISO 8601 UTC; ``None`` when unknown (older records, a session created elsewhere)."""
    handle: dict[str, Any] | None = None
    """A session with a reattach window: its :class:`~remote_acp.session.handle.SessionHandle`
    (secret included: the history is private), for ``remote-acp attach``; ``None`` once it ended."""
    run: str | None = None
    """The run that recorded a handle while it held the session: ``"PID START BOOT"``, its process
    id, start time (clock ticks since boot) and the machine's boot id, so one that died is told
    from one that runs (and one on another machine or before a reboot from either)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def created_at(self) -> datetime | None:
        """:attr:`created` as a time, or ``None`` when unknown or unreadable (a foreign line)."""
        if self.created is None:
            return None
        try:
            when = datetime.fromisoformat(self.created)
        except ValueError:
            return None
        return when if when.utcoffset() is not None else None

    @classmethod
    def from_json(cls, obj: object) -> SessionRecord | None:
        """The record ``obj`` describes, or ``None`` when it is not one (wrong shape or types)."""
        if not isinstance(obj, dict):
            return None
        names = {f.name for f in fields(cls)}
        if not names >= obj.keys():
            return None
        optional = {"error_kind", "created", "handle", "run"}
        for name, value in obj.items():
            if name == "handle" and isinstance(value, dict):
                continue  # checked whole when used (SessionHandle.from_json)
            if not (isinstance(value, str) or (value is None and name in optional)):
                return None
        try:
            return cls(**obj)
        except TypeError:  # a required field is missing
            return None


def _parse(line: str) -> SessionRecord | None:
    try:
        return SessionRecord.from_json(json.loads(line))
    except (ValueError, RecursionError):
        return None


def _encode(record: SessionRecord) -> bytes:
    return (json.dumps(record.to_json(), ensure_ascii=True) + "\n").encode("ascii")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class SessionHistory:
    def __init__(self, directory: Path | None = None, *, keep: int = _KEEP, lock_wait_s: float = _LOCK_WAIT_S) -> None:
        self._directory = directory
        self.keep = keep
        self.lock_wait_s = lock_wait_s

    @cached_property
    def path(self) -> Path:
        """The history file, found when first used (see :func:`default_state_dir`)."""
        return (self._directory or default_state_dir()) / "sessions.jsonl"

    @property
    def lock_path(self) -> Path:
        return self.path.with_name("sessions.lock")

    def add(self, record: SessionRecord) -> None:
        """Append ``record`` (and compact the file when it has grown past its bound).

        :raises HistoryError: the state directory or the file cannot be written, or another run
            held the lock for longer than the bound.
        """
        line = _encode(record)
        self._trusted()
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with self._locked():
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    _write_all(fd, line)
                finally:
                    os.close(fd)
                self._compact()
        except OSError as exc:
            raise HistoryError(f"cannot record the session in {self.path}: {exc}") from None

    def records(self) -> list[SessionRecord]:
        """Every readable record, oldest first (lines that are not records are skipped).

        :raises HistoryError: the file exists but cannot be read.
        """
        self._trusted()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise HistoryError(f"cannot read the session history {self.path}: {exc.strerror or exc}") from None
        lines = data.decode("utf-8", errors="replace").splitlines()
        return [record for line in lines if (record := _parse(line)) is not None]

    def _trusted(self) -> None:
        """A history another user could write would resume their sessions: refuse it."""
        why = untrusted(self.path.parent)
        if why is not None:
            raise HistoryError(
                f"will not use the session history in {self.path.parent}: {why}; make it private "
                "(chmod go-w, owned by you) or set REMOTE_ACP_STATE_DIR to a directory of your own"
            )

    def recent(
        self,
        *,
        workspace: str | None = None,
        target: str | None = None,
        agent: str | None = None,
        limit: int = 20,
    ) -> list[SessionRecord]:
        """The latest record of each session, newest first, optionally for one workspace, target
        and agent command."""
        latest: dict[str, SessionRecord] = {}
        for record in self.records():
            if workspace is not None and record.workspace != workspace:
                continue
            if target is not None and record.target != target:
                continue
            if agent is not None and record.agent != agent:
                continue
            latest.pop(record.session_id, None)
            latest[record.session_id] = record
        return list(reversed(latest.values()))[: max(limit, 0)]

    def find(self, session_id: str) -> SessionRecord | None:
        """The latest record of ``session_id``, or ``None`` when the history holds none.

        :raises HistoryError: the file exists but cannot be read.
        """
        found = None
        for record in self.records():
            if record.session_id == session_id:
                found = record
        return found

    def close_to(self, session_id: str, *, limit: int = 3) -> list[SessionRecord]:
        """Recorded sessions a mistyped or truncated ``session_id`` may have meant: those whose id
        shares its start (or contains it), else the most recent ones."""
        recent = self.recent(limit=1000)
        stem = session_id[: max(4, len(session_id) // 2)]
        near = [r for r in recent if r.session_id.startswith(stem) or session_id in r.session_id]
        return (near or recent)[:limit]

    def created(self, session_id: str, workspace: str) -> datetime | None:
        """When ``session_id`` (in ``workspace``) was created, as the latest record that knows says.

        :raises HistoryError: the file exists but cannot be read.
        """
        found = None
        for record in self.records():
            if record.session_id == session_id and record.workspace == workspace:
                found = record.created_at() or found
        return found

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the history's exclusive lock, waiting at most ``lock_wait_s`` for it."""
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + self.lock_wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise HistoryError(
                            f"another run held the lock {self.lock_path} for more than {self.lock_wait_s:g} s"
                        ) from None
                    time.sleep(_LOCK_POLL_S)
            yield  # closing the descriptor releases the lock
        finally:
            os.close(fd)

    def _compact(self) -> None:
        """Keep the latest ``keep`` records; call with the lock held, so no append is lost."""
        records = self.records()
        if len(records) < 2 * self.keep:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _write_all(fd, b"".join(_encode(r) for r in records[-self.keep :]))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)

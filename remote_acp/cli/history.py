"""Recent sessions of the CLI, so a later run can continue one (``run --resume``).

One JSON object per line in ``sessions.jsonl`` under the platformdirs user state directory
(``REMOTE_ACP_STATE_DIR`` overrides it). Lines are appended whole in one write, so concurrent
runs do not interleave; the file is compacted when it grows past a bound.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["SessionRecord", "SessionHistory", "default_state_dir"]

_KEEP: Final = 500
_COMPACT_AT: Final = 2 * _KEEP


def default_state_dir() -> Path:
    override = os.environ.get("REMOTE_ACP_STATE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return platformdirs.user_state_path("remote-acp")


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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class SessionHistory:
    def __init__(self, directory: Path | None = None) -> None:
        self.path = (directory or default_state_dir()) / "sessions.jsonl"

    def add(self, record: SessionRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(record.to_json(), ensure_ascii=False) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        self._compact()

    def records(self) -> list[SessionRecord]:
        """Every readable record, oldest first (unreadable lines are skipped)."""
        try:
            text = self.path.read_text()
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            try:
                out.append(SessionRecord(**json.loads(line)))
            except (ValueError, TypeError):
                continue
        return out

    def recent(
        self, *, workspace: str | None = None, target: str | None = None, limit: int = 20
    ) -> list[SessionRecord]:
        """The latest record of each session, newest first, optionally for one workspace/target."""
        latest: dict[str, SessionRecord] = {}
        for record in self.records():
            if workspace is not None and record.workspace != workspace:
                continue
            if target is not None and record.target != target:
                continue
            latest.pop(record.session_id, None)
            latest[record.session_id] = record
        return list(reversed(latest.values()))[:limit]

    def _compact(self) -> None:
        records = self.records()
        if len(records) < _COMPACT_AT:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records[-_KEEP:]))
        os.replace(tmp, self.path)

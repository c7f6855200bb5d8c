"""Probe results kept with their age, so a check run soon after another can reuse them.

One JSON file per host, agent, workspace and probe settings (named by a hash of them) under
``$REMOTE_ACP_CACHE_DIR/probes``, else the platformdirs user cache directory's ``probes``. Only
the probe is kept, never a handshake: whether an agent answers is asked each time. An entry that
does not read (another version's, a torn write) is a miss, never an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hostinv.causes import Cause
from hostinv.keep import write_whole
from hostinv.probes import HostProbe, ProbeReport, Verdict

from ..paths import cache_base
from ..targets.ssh.config import ssh_g_cache_dir

if TYPE_CHECKING:
    from pathlib import Path

    from hostinv import Host


__all__ = ["CachedProbe", "ProbeCache", "probe_cache_dir", "resolve_cache_dir"]

_TUPLES = ("load", "unavailable", "invalid")


def probe_cache_dir() -> Path:
    """``$REMOTE_ACP_CACHE_DIR/probes``, else the platformdirs user cache directory's ``probes``."""
    return cache_base() / "probes"


def resolve_cache_dir() -> Path:
    """Where probes keep ``ssh -G``'s answers (:mod:`hostinv.resolve_cache`), as sessions do."""
    return ssh_g_cache_dir()


@dataclass(frozen=True, slots=True)
class CachedProbe:
    """A probe read back from the cache, and how old it is (seconds since it ran)."""

    probe: HostProbe
    age_s: float


class ProbeCache:
    """Probe results by host, agent, workspace and settings (``context``: the settings that change
    what a probe finds, as text)."""

    def __init__(self, directory: Path | None = None, *, context: str = "") -> None:
        self.directory = directory if directory is not None else probe_cache_dir()
        self._context = context

    def _path(self, host: Host, agent: str, workspace: str) -> Path:
        fields = {k: v for k, v in host.to_json().items() if k != "sources"}
        key = json.dumps([fields, agent, workspace, self._context], sort_keys=True, default=str)
        return self.directory / f"probe-{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    def get(self, host: Host, agent: str, workspace: str, *, max_age_s: float) -> CachedProbe | None:
        """The probe kept for these, when it is at most ``max_age_s`` old; else ``None``."""
        if max_age_s <= 0:
            return None
        try:
            data = json.loads(self._path(host, agent, workspace).read_text(encoding="utf-8"))
            age = time.time() - float(data["at"])
            if not 0 <= age <= max_age_s:
                return None
            raw = data["report"]
            report = None if raw is None else ProbeReport(**{k: _thaw(k, v) for k, v in raw.items()})
            cause = data.get("cause")
            probe = HostProbe(
                host,
                Verdict(data["verdict"]),
                str(data["message"]),
                data["fix"],
                report,
                float(data["latency_s"]),
                None if cause is None else Cause(cause),
            )
            return CachedProbe(probe, age)
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def put(self, probe: HostProbe, agent: str, workspace: str) -> None:
        """Keep ``probe`` (written atomically).

        :raises OSError: the cache directory cannot be written.
        """
        # Shallow: the report's fields are plain values and tuples of them (asdict deep-copies).
        report = (
            None
            if probe.report is None
            else {f.name: getattr(probe.report, f.name) for f in dataclasses.fields(probe.report)}
        )
        entry = {
            "at": time.time(),
            "verdict": probe.verdict.value,
            "message": probe.message,
            "fix": probe.fix,
            "latency_s": probe.latency_s,
            "cause": probe.cause.value if probe.cause is not None else None,
            "report": report,
        }
        path = self._path(probe.host, agent, workspace)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_whole(path, json.dumps(entry).encode(), prefix=".probe-")  # one write, not json.dump's many


def _thaw(key: str, value: Any) -> Any:
    return tuple(value) if key in _TUPLES and isinstance(value, list) else value

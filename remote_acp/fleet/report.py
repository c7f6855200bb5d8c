"""One host's check as one result: the probe's facts, the handshake's, and a single verdict.

A :class:`HostCheck` is what ``remote-acp check host`` prints per host, as a table row
(:func:`table_rows`) or one JSON object (:meth:`HostCheck.to_json`, stable keys, every key present,
``null`` when unknown), and what :func:`exit_status` reads for the command's status.

Exit statuses of ``check host`` (beside the command's usual 2 usage, 10 local I/O, 130, 141):
0 every host is ready; :data:`EXIT_SOME_UNREACHABLE` (20) some hosts could not be logged in to
(``unreachable``, ``auth_failed``, ``host_key_*``) and every host reached is ready;
:data:`EXIT_SOME_NOT_READY` (21) some host that was reached is not ready (any other verdict),
whatever the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from hostinv.causes import CAUSES, Cause
from hostinv.probes import CONNECTION_VERDICTS, Verdict

from ..masking import escape_control

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from hostinv import Host
    from hostinv.probes import ProbeReport

__all__ = [
    "EXIT_SOME_NOT_READY",
    "EXIT_SOME_UNREACHABLE",
    "TABLE_COLUMNS",
    "HandshakeFacts",
    "HostCheck",
    "detail_lines",
    "exit_status",
    "table_rows",
]

EXIT_SOME_UNREACHABLE: Final = 20
EXIT_SOME_NOT_READY: Final = 21


@dataclass(frozen=True, slots=True)
class HandshakeFacts:
    """What the agent said about itself in a handshake that went through.

    ``auth_required``: whether ``initialize`` listed auth methods (``None``: not known)."""

    agent_name: str
    agent_version: str
    auth_required: bool | None = None


@dataclass(frozen=True, slots=True)
class HostCheck:
    """The check of one host: one verdict, the message and fix a person acts on, and the facts.

    ``latency_s``: the probe's round trip plus the handshake's. ``error_kind`` and ``retryable``:
    the session error the handshake ended with (``run --json``'s vocabulary), when it ended with
    one. ``probe_age_s``: how old a probe reused from the cache was (``None``: probed now).
    """

    host: Host
    verdict: Verdict
    message: str
    fix: str | None = None
    latency_s: float = 0.0
    report: ProbeReport | None = None
    handshake: HandshakeFacts | None = None
    error_kind: str | None = None
    cause: Cause | None = None
    probe_age_s: float | None = None

    @property
    def retryable(self) -> bool | None:
        """Whether checking again later can change the verdict with nothing else changed (the
        cause's, :data:`hostinv.causes.CAUSES`); ``None`` when ready."""
        return None if self.cause is None else CAUSES[self.cause].retryable

    @property
    def ready(self) -> bool:
        return self.verdict is Verdict.READY

    @property
    def agent_version(self) -> str | None:
        """The handshake's agentInfo version, else the first line of the probe's ``--version``."""
        if self.handshake is not None and self.handshake.agent_version:
            return self.handshake.agent_version
        report = self.report
        if report is not None and report.agent_exit == 0 and report.agent_version:
            return report.agent_version
        return None

    def to_json(self) -> dict[str, Any]:
        """One object per host: stable keys, every one present (``null`` when unknown)."""
        report, shake = self.report, self.handshake
        return {
            "type": "host_check",
            "host": self.host.name,
            "destination": self.host.destination,
            "verdict": self.verdict.value,
            "ready": self.ready,
            "message": self.message,
            "fix": self.fix,
            "error_kind": self.error_kind,
            "cause": self.cause.value if self.cause is not None else None,
            "retryable": self.retryable,
            "latency_ms": round(self.latency_s * 1000),
            "probe_age_s": None if self.probe_age_s is None else round(self.probe_age_s, 1),
            "handshake": shake is not None,
            "os": report.os if report else None,
            "arch": report.arch if report else None,
            "kernel": report.kernel if report else None,
            "cores": report.cores if report else None,
            "load": list(report.load) if report and report.load else None,
            "mem_available_kib": report.mem_available_kib if report else None,
            "disk_free_kib": report.disk_free_kib if report else None,
            "capacity": self.host.capacity,
            "slots_held": report.slots_held if report else None,
            "agent_path": report.agent_path if report else None,
            "agent_name": shake.agent_name or None if shake else None,
            "agent_version": self.agent_version,
            "auth_required": shake.auth_required if shake else None,
        }


def exit_status(checks: Iterable[HostCheck]) -> int:
    """0 every host ready; 21 some host reached is not ready; else 20 some host was not reached."""
    verdicts = {c.verdict for c in checks} - {Verdict.READY}
    if not verdicts:
        return 0
    return EXIT_SOME_UNREACHABLE if verdicts <= CONNECTION_VERDICTS else EXIT_SOME_NOT_READY


TABLE_COLUMNS: Final = ("host", "verdict", "latency", "os/arch", "cores", "load", "slots", "agent")
"""The summary table's columns: short facts only, so a row fits 80 columns; what a host said and
what to do about it follow the table, a line each (:func:`detail_lines`), never cut."""


def table_rows(checks: Sequence[HostCheck]) -> list[tuple[str, ...]]:
    """The table's cells per host (in the order given: the inventory's), as plain text with
    whatever a host or an agent wrote escaped (no terminal control reaches the screen)."""
    rows: list[tuple[str, ...]] = []
    for c in checks:
        r = c.report
        system = "/".join(p for p in (r.os, r.arch) if p) if r else ""
        load = f"{r.load[0]:.2f}" if r and r.load else ""
        age = f" (cached {c.probe_age_s:.0f}s)" if c.probe_age_s is not None else ""
        cells = (
            c.host.name,
            c.verdict.value,
            f"{c.latency_s * 1000:.0f} ms{age}",
            system,
            str(r.cores) if r and r.cores is not None else "",
            load,
            f"{r.slots_held}/{c.host.capacity}" if r and r.slots_held is not None else "",
            _agent(c),
        )
        rows.append(tuple(escape_control(cell) for cell in cells))
    return rows


def detail_lines(checks: Sequence[HostCheck]) -> list[str]:
    """For each host that is not ready: ``host (verdict): reason``, then ``  fix: ...`` when there
    is one; whole (a fix is copied and run as printed), escaped."""
    lines: list[str] = []
    for c in checks:
        if c.ready:
            continue
        lines.append(escape_control(f"{c.host.name} ({c.verdict.value}): {c.message}"))
        if c.fix:
            lines.append("  fix: " + escape_control(c.fix))
    return lines


def _agent(check: HostCheck) -> str:
    shake = check.handshake
    if shake is not None and shake.agent_name and shake.agent_version:
        return f"{shake.agent_name} {shake.agent_version}"
    return check.agent_version or ""

"""Reading a probe's report: pure, tolerant, bounded.

The report is what :func:`hostinv.probes.command.probe_script` prints: a header line, ``key=value``
lines, an end line. The parser takes the stdout of the probe's channel as text (the runner decodes
it with ``errors="replace"``) and never raises on a value: a field missing or unreadable is
``None``, and the report says how many lines it ignored and which values it could not read, so a
host with no ``getconf``, a BusyBox ``df`` or a dotfile that prints still gives a report.

What does raise (:class:`ProbeReportError`) is a report that is not there: no header (the script
never ran: a ``ForceCommand``, a shell that is not one, stdin eaten), a header of another version,
or a header with no end line, meaning the probe was cut short (timeout, connection lost) and the
fields it has may be missing for that reason rather than because the host lacks a tool.

Anything before the last header is the login's noise (a dotfile's greeting, a fake report a dotfile
printed) and is not read. Lines split on ``\\n`` only: the host escapes every control byte inside a
value, so a CR, a form feed or a Unicode line separator in a value cannot make a line of its own.
Decoded values are bounded (:data:`MAX_VALUE_CHARS`) and hold no control character (each becomes
U+FFFD), so they can be printed to a terminal as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from .command import MAX_VALUE_CHARS, REPORT_END, REPORT_HEADER

__all__ = [
    "MAX_VALUE_CHARS",
    "LoginLookup",
    "NoReportError",
    "ProbeReport",
    "ProbeReportError",
    "ReportCutShortError",
    "UnsupportedReportError",
    "WorkspaceState",
    "parse_report",
]

WorkspaceState = Literal["dir", "missing", "not_dir", "unset"]
"""``dir``: a directory; ``missing``: nothing there; ``not_dir``: something that is not a
directory (a file, a dangling link); ``unset``: no workspace was asked about."""
LoginLookup = Literal["found", "missing", "timeout", "failed", "no_shell", "skipped"]
"""What the login shell said when the agent was not on the session's PATH: ``found`` (in
``login_dir``), ``missing``, ``timeout`` (its profile did not answer in time), ``failed`` (it
printed no PATH: exited, or is no shell, such as nologin), ``no_shell`` (``$SHELL`` unset or not
executable), ``skipped`` (the agent program is a path: PATH plays no part)."""

_HEADER_PREFIX: Final = REPORT_HEADER.rsplit(" ", 1)[0] + " "
_KEY = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")
_ESCAPE = re.compile(r"\\(?:\\|x([0-9a-fA-F]{2}))")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_EXIT = re.compile(r"exit:(\d{1,3})\Z")


class ProbeReportError(ValueError):
    """The probe's output holds no whole report. ``output_tail``: the end of what came, masked of
    control characters, for the message."""

    def __init__(self, message: str, output_tail: str) -> None:
        super().__init__(message)
        self.output_tail = output_tail


class NoReportError(ProbeReportError):
    """No report header: the probe script did not run (or printed nothing before it died)."""


class UnsupportedReportError(ProbeReportError):
    """A report of another version than this parser reads."""


class ReportCutShortError(ProbeReportError):
    """A header and no end line: the probe was cut short. ``partial`` holds what arrived."""

    def __init__(self, message: str, output_tail: str, partial: ProbeReport) -> None:
        super().__init__(message, output_tail)
        self.partial = partial


@dataclass(frozen=True, slots=True)
class ProbeReport:
    """What one probe read on a host. Every field is ``None`` when the host did not say.

    Sizes are KiB as ``df -k`` and ``/proc/meminfo`` give them. ``agent_exit``: the status of
    ``AGENT --version`` (``None`` when it timed out, or did not run: not found, or skipped);
    ``agent_version``: the first non-empty line it printed, stdout and stderr together (an error
    message when it failed).
    ``unavailable``: the fields the host had no tool or file for, as it named them.
    ``slots_held``: agent slots that running sessions hold on the host (``None``: not asked, or
    the host cannot tell: no ``/proc/locks``); ``slots_unusable``: the slot directory is a link,
    not a directory, or another user's, so no session can take a slot (``slot_dir`` names it).
    ``garbage_lines``: lines inside the report that
    were not ``key=value`` with a valid key; ``invalid``: keys whose value did not read (the field is ``None``).
    """

    os: str | None = None
    arch: str | None = None
    kernel: str | None = None
    cores: int | None = None
    cores_from: str | None = None
    load: tuple[float, float, float] | None = None
    load_from: str | None = None
    mem_total_kib: int | None = None
    mem_available_kib: int | None = None
    disk_free_kib: int | None = None
    workspace: WorkspaceState | None = None
    workspace_writable: bool | None = None
    path: str | None = None
    shell: str | None = None
    agent_found: bool | None = None
    agent_path: str | None = None
    agent_timed_out: bool = False
    agent_exit: int | None = None
    agent_version: str | None = None
    login: LoginLookup | None = None
    login_dir: str | None = None
    login_path: str | None = None
    slots_held: int | None = None
    slots_unusable: bool = False
    slot_dir: str | None = None
    unavailable: tuple[str, ...] = ()
    garbage_lines: int = 0
    invalid: tuple[str, ...] = field(default=())

    @property
    def load_per_core(self) -> float | None:
        """The one-minute load divided by the cores: how busy the host is, across host sizes."""
        if self.load is None or not self.cores:
            return None
        return self.load[0] / self.cores


def _decode(raw: str) -> str:
    def one(match: re.Match[str]) -> str:
        return "\\" if match.group(1) is None else chr(int(match.group(1), 16))

    text = _ESCAPE.sub(one, raw[: MAX_VALUE_CHARS * 4]).replace("\t", " ").strip()
    return _CONTROL.sub("\ufffd", text)[:MAX_VALUE_CHARS]


def _mask(text: str) -> str:
    return _CONTROL.sub("\ufffd", text)


def _int(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 20 else None


def _load(value: str) -> tuple[float, float, float] | None:
    numbers = _NUMBER.findall(value)
    if len(numbers) < 3:
        return None
    return float(numbers[0]), float(numbers[1]), float(numbers[2])


_ENUMS: Final[dict[str, frozenset[str]]] = {
    "workspace": frozenset({"dir", "missing", "not_dir", "unset"}),
    "workspace_writable": frozenset({"yes", "no"}),
    "agent": frozenset({"found", "missing"}),
    "login": frozenset({"found", "missing", "timeout", "failed", "no_shell", "skipped"}),
    "slots": frozenset({"unusable"}),
}
_TEXT: Final = frozenset(
    {"os", "arch", "kernel", "cores_from", "load_from", "path", "shell", "agent_path", "agent_version"}
    | {"login_dir", "login_path", "slot_dir"}
)
_INTS: Final = frozenset({"cores", "mem_total_kib", "mem_available_kib", "disk_free_kib", "slots_held"})


def _fields(lines: list[str]) -> tuple[dict[str, object], int, list[str]]:
    values: dict[str, object] = {}
    garbage = 0
    invalid: list[str] = []
    for line in lines:
        key, sep, raw = line.partition("=")
        if not sep or not _KEY.match(key):
            garbage += 1
            continue
        if key in values or key in invalid:
            continue  # the first one stands
        value = _decode(raw)
        parsed: object
        if key in _TEXT:
            parsed = value or None
        elif key in _INTS:
            parsed = _int(value)
        elif key in _ENUMS:
            parsed = value if value in _ENUMS[key] else None
        elif key == "load":
            parsed = _load(value)
        elif key == "agent_run":
            exit_match = _EXIT.match(value)
            parsed = value if value in ("timeout", "skipped") else int(exit_match.group(1)) if exit_match else None
        elif key == "unavailable":
            parsed = tuple(sorted({name for name in value.split(",") if _KEY.match(name)}))
        else:
            continue  # a key of a later probe: not garbage, not ours
        if parsed is None:
            invalid.append(key)
        else:
            values[key] = parsed
    return values, garbage, invalid


def _report(values: dict[str, object], garbage: int, invalid: list[str]) -> ProbeReport:
    report = ProbeReport(garbage_lines=garbage, invalid=tuple(invalid))
    changes: dict[str, object] = {}
    for key, value in values.items():
        if key == "agent":
            changes["agent_found"] = value == "found"
        elif key == "workspace_writable":
            changes[key] = value == "yes"
        elif key == "slots":
            changes["slots_unusable"] = value == "unusable"
        elif key == "agent_run":
            changes["agent_timed_out"] = value == "timeout"
            changes["agent_exit"] = value if isinstance(value, int) else None
        else:
            changes[key] = value
    return replace(report, **changes)  # type: ignore[arg-type]  # keys and types checked above


def _tail(text: str) -> str:
    return _mask(text[-400:].strip())


def parse_report(text: str) -> ProbeReport:
    """The report in ``text`` (the probe channel's stdout), from its last header on.

    :raises NoReportError: no header.
    :raises UnsupportedReportError: a header of another report version.
    :raises ReportCutShortError: a header and no end line; ``partial`` holds the fields that came.
    """
    lines = text.split("\n")
    starts = [
        i
        for i, line in enumerate(lines)
        if line.rstrip("\r").startswith(_HEADER_PREFIX) and line.rstrip("\r") != REPORT_END
    ]
    if not starts:
        raise NoReportError("the probe printed no report", _tail(text))
    start = starts[-1]
    header = lines[start].rstrip("\r")
    if header != REPORT_HEADER:
        version = _mask(header[len(_HEADER_PREFIX) :][:40])
        raise UnsupportedReportError(f"the probe printed a report of version {version!r}", _tail(text))
    body: list[str] = []
    complete = False
    for line in lines[start + 1 :]:
        line = line.rstrip("\r")
        if line == REPORT_END:
            complete = True
            break
        body.append(line)
    report = _report(*_fields(body))
    if not complete:
        raise ReportCutShortError("the probe was cut short: its report has no end line", _tail(text), report)
    return report

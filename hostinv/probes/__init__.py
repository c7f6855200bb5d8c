"""Probes: what one round trip to a host reads, as a command and a pure parser, and the verdicts.

:mod:`.command` builds the script (data travel inside it, never as code), :mod:`.parse` reads its
report without I/O, and :mod:`.verdicts` turns a report into one verdict a person can act on.
Nothing here opens a connection: the runner sends :func:`probe_script` to :data:`PROBE_COMMAND`'s
stdin over one channel and hands its stdout to :func:`parse_report`.
"""

from .command import PROBE_COMMAND, REPORT_END, REPORT_HEADER, probe_script
from .parse import (
    NoReportError,
    ProbeReport,
    ProbeReportError,
    ReportCutShortError,
    UnsupportedReportError,
    parse_report,
)
from .verdicts import CONNECTION_VERDICTS, MEANING, SEED_READINESS, Judgement, Verdict, judge_probe_error, judge_report

__all__ = [
    "CONNECTION_VERDICTS",
    "MEANING",
    "PROBE_COMMAND",
    "REPORT_END",
    "REPORT_HEADER",
    "SEED_READINESS",
    "Judgement",
    "NoReportError",
    "ProbeReport",
    "ProbeReportError",
    "ReportCutShortError",
    "UnsupportedReportError",
    "Verdict",
    "judge_probe_error",
    "judge_report",
    "parse_report",
    "probe_script",
]

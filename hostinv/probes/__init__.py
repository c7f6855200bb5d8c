"""Probes: what one round trip to a host reads, as a command and a pure parser, and the verdicts.

:mod:`.command` builds the script (data travel inside it, never as code), :mod:`.parse` reads its
report without I/O, :mod:`.verdicts` turns a report into one verdict a person can act on, and
:mod:`.result` is the one way from what the script printed to a host's :class:`HostProbe`.
The runner (:mod:`.runner`, asyncssh imported on first use) sends :func:`probe_script` to
:data:`PROBE_COMMAND`'s stdin over one channel and hands its stdout to
:meth:`HostProbe.from_output`. The script is plain POSIX sh
with its data inside, so another login can run it too (``remote_acp``'s host check runs it in a
session's own login, ahead of the agent) and read what it printed with the same
:meth:`HostProbe.from_output`.
"""

from .command import PROBE_COMMAND, REPORT_END, REPORT_HEADER, probe_script
from .host_keys import HostKeyCheck
from .parse import (
    NoReportError,
    ProbeReport,
    ProbeReportError,
    ReportCutShortError,
    UnsupportedReportError,
    parse_report,
)
from .result import HostProbe
from .runner import PER_ADDRESS, ProbeSettings, judge_connect_error, probe_host, probe_hosts
from .verdicts import CONNECTION_VERDICTS, MEANING, SEED_READINESS, Judgement, Verdict, judge_probe_error, judge_report

__all__ = [
    "CONNECTION_VERDICTS",
    "MEANING",
    "PER_ADDRESS",
    "PROBE_COMMAND",
    "REPORT_END",
    "REPORT_HEADER",
    "SEED_READINESS",
    "HostKeyCheck",
    "HostProbe",
    "Judgement",
    "NoReportError",
    "ProbeReport",
    "ProbeReportError",
    "ProbeSettings",
    "ReportCutShortError",
    "UnsupportedReportError",
    "Verdict",
    "judge_connect_error",
    "judge_probe_error",
    "judge_report",
    "parse_report",
    "probe_host",
    "probe_hosts",
    "probe_script",
]

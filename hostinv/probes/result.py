"""One host's probe result, and the one way a probe's output becomes one.

Whichever login ran the probe script (the runner's asyncssh channel, or ``remote_acp``'s session
login, where it runs as the preflight), what the script printed goes through
:meth:`HostProbe.from_output`: its report parsed, judged against the agent and workspace probed
(and the host's capacity, when the slots were counted), timed. So a verdict does not depend on
which way the probe was taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .parse import ProbeReportError, parse_report
from .verdicts import Judgement, Verdict, judge_probe_error, judge_report

if TYPE_CHECKING:
    from ..causes import Cause
    from ..models import Host
    from .parse import ProbeReport

__all__ = ["HostProbe"]


@dataclass(frozen=True, slots=True)
class HostProbe:
    """One host's probe: its verdict, the message and fix a person acts on, the report when one
    came back whole, and ``latency_s``, from the start of the login to the end of the probe."""

    host: Host
    verdict: Verdict
    message: str
    fix: str | None
    report: ProbeReport | None
    latency_s: float
    cause: Cause | None = None
    """Why it is not ready (:mod:`hostinv.causes`); ``None`` when ready."""

    @property
    def ready(self) -> bool:
        return self.verdict is Verdict.READY

    @property
    def judgement(self) -> Judgement:
        """Its verdict, message, fix and cause, as a judgement."""
        return Judgement(self.verdict, self.message, self.fix, self.cause)

    @classmethod
    def from_judgement(
        cls, host: Host, judgement: Judgement, report: ProbeReport | None = None, *, latency_s: float
    ) -> HostProbe:
        """``host``'s probe judged ``judgement`` (its cause, or the verdict's commonest)."""
        return cls(host, judgement.verdict, judgement.message, judgement.fix, report, latency_s, judgement.why)

    @classmethod
    def from_output(
        cls,
        host: Host,
        output: str,
        agent: str,
        workspace: str,
        *,
        slots_counted: bool,
        latency_s: float,
        stderr_tail: str = "",
    ) -> HostProbe:
        """``host``'s probe for ``agent`` in ``workspace`` from what the probe script printed
        (``output``): its report judged (:func:`~hostinv.probes.judge_report`; with
        ``slots_counted``, ``at_capacity`` when it holds as many slots as the host's capacity), or
        ``probe_failed`` when no whole report came back (:func:`~hostinv.probes.judge_probe_error`,
        saying ``stderr_tail``, masked by the caller, when the output says nothing)."""
        try:
            report = parse_report(output)
        except ProbeReportError as exc:
            return cls.from_judgement(host, judge_probe_error(exc, stderr_tail), latency_s=latency_s)
        capacity = host.capacity if slots_counted else None
        return cls.from_judgement(
            host, judge_report(report, agent, workspace, capacity=capacity), report, latency_s=latency_s
        )

"""One verdict per host, from one taxonomy, and the probe's share of deciding it.

Words: a *verdict* is one value of :class:`Verdict`; a *judgement* is a verdict with its message,
fix and cause (:class:`Judgement`), what each ``judge_*`` function gives.

Every check of a host ends in exactly one :class:`Verdict`. The probe alone can give ``ready``,
``agent_not_found``, ``workspace_invalid``, ``agent_failed`` and ``probe_failed``
(:func:`judge_report`, :func:`judge_probe_error`); the connection gives the ssh ones
(``unreachable``, ``auth_failed``, ``host_key_*``), the handshake through a real session start the
ACP ones (``handshake_timeout``, ``incompatible_protocol``, ``credential_unverified``, and
``agent_failed`` for an agent that dies there), and the host's slots ``at_capacity``. Those callers
build their :class:`Judgement` with the same vocabulary.

The seed's readiness reasons map onto it (:data:`SEED_READINESS`): ``missing_binary`` is
``agent_not_found``, ``spawn_error`` ``agent_failed``, ``unauthenticated``
``credential_unverified``; ``handshake_timeout`` and ``incompatible_protocol`` keep their names.

Order, when a probe finds several problems: the one a session would meet first wins (a session
enters the workspace before it starts the agent), and the message names the others, so one fix
does not reveal the next only on the following run.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from ..causes import Cause, fix_for
from .parse import ReportCutShortError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .parse import ProbeReport, ProbeReportError

__all__ = [
    "CONNECTION_VERDICTS",
    "MEANING",
    "SEED_READINESS",
    "Judgement",
    "Verdict",
    "judge_probe_error",
    "judge_report",
]


class Verdict(enum.StrEnum):
    """Why a host can or cannot run the agent now. The values are the stable JSON vocabulary;
    :data:`MEANING` says what each one means."""

    READY = "ready"
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth_failed"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    HOST_KEY_CHANGED = "host_key_changed"
    AGENT_NOT_FOUND = "agent_not_found"
    WORKSPACE_INVALID = "workspace_invalid"
    AGENT_FAILED = "agent_failed"
    HANDSHAKE_TIMEOUT = "handshake_timeout"
    INCOMPATIBLE_PROTOCOL = "incompatible_protocol"
    CREDENTIAL_UNVERIFIED = "credential_unverified"
    PROBE_FAILED = "probe_failed"
    AT_CAPACITY = "at_capacity"


MEANING: Final[Mapping[Verdict, str]] = MappingProxyType(
    {
        Verdict.READY: "the host can run the agent now: reached, logged in, the workspace is a writable "
        "directory, the agent is on the session's PATH (and, after a handshake, it answered initialize "
        "and opened a session); it also says whether the agent asks for authentication",
        Verdict.UNREACHABLE: "no ssh connection: the name did not resolve, the port refused or did not "
        "answer within the connect timeout, or the connection dropped before login",
        Verdict.AUTH_FAILED: "sshd refused every key offered (never a prompt: probes run unattended)",
        Verdict.HOST_KEY_UNKNOWN: "the host's key is in no known_hosts file and the policy refuses a new "
        "key (strict host key checking 'yes')",
        Verdict.HOST_KEY_CHANGED: "the host offered a key other than the one known_hosts holds for it: "
        "a reinstalled host, or someone in between; refused whatever the policy",
        Verdict.AGENT_NOT_FOUND: "the agent program is not on the PATH a session gets (the login shell run "
        "without a terminal); the message says when an interactive login shell would find it, and where",
        Verdict.WORKSPACE_INVALID: "the workspace is missing, not a directory, or not writable and "
        "enterable by the user",
        Verdict.AGENT_FAILED: "the agent was found but does not run: it cannot be executed (status 126 "
        "or 127, such as a missing interpreter), or it exited early in the handshake (status and masked "
        "stderr tail)",
        Verdict.HANDSHAKE_TIMEOUT: "the agent started but did not answer initialize or session/new "
        "within the handshake timeout",
        Verdict.INCOMPATIBLE_PROTOCOL: "the agent answered with an ACP protocol version this client "
        "does not speak, or with something that is not ACP",
        Verdict.CREDENTIAL_UNVERIFIED: "the agent runs but refused to open a session for want of a "
        "credential (-32000, authentication required): log the agent in on that host, or pass its key",
        Verdict.PROBE_FAILED: "logged in, but the probe gave no whole report: the login ran something "
        "else (ForceCommand, a nologin shell, a dotfile that ate stdin) or the probe was cut short",
        Verdict.AT_CAPACITY: "the host runs as many agents as its capacity allows; it is healthy, "
        "retry later or place the session elsewhere",
    }
)

VERDICT_CAUSE: Final[Mapping[Verdict, Cause]] = MappingProxyType(
    {
        Verdict.UNREACHABLE: Cause.CONNECT_FAILED,
        Verdict.AUTH_FAILED: Cause.AUTH_FAILED,
        Verdict.HOST_KEY_UNKNOWN: Cause.HOST_KEY_UNKNOWN,
        Verdict.HOST_KEY_CHANGED: Cause.HOST_KEY_CHANGED,
        Verdict.AGENT_NOT_FOUND: Cause.AGENT_NOT_FOUND,
        Verdict.WORKSPACE_INVALID: Cause.WORKSPACE_INVALID,
        Verdict.AGENT_FAILED: Cause.AGENT_EXITED,
        Verdict.HANDSHAKE_TIMEOUT: Cause.NO_ANSWER,
        Verdict.INCOMPATIBLE_PROTOCOL: Cause.PROTOCOL_INCOMPATIBLE,
        Verdict.CREDENTIAL_UNVERIFIED: Cause.CREDENTIAL_REFUSED,
        Verdict.PROBE_FAILED: Cause.LOGIN_REFUSED,
        Verdict.AT_CAPACITY: Cause.AT_CAPACITY,
    }
)
"""The commonest cause of each verdict, for a judgement that names none."""

CONNECTION_VERDICTS: Final = frozenset(
    {Verdict.UNREACHABLE, Verdict.AUTH_FAILED, Verdict.HOST_KEY_UNKNOWN, Verdict.HOST_KEY_CHANGED}
)
"""The verdicts of a host never logged in to: the "some unreachable" exit status."""

SEED_READINESS: Final[Mapping[str, Verdict]] = MappingProxyType(
    {
        "missing_binary": Verdict.AGENT_NOT_FOUND,
        "spawn_error": Verdict.AGENT_FAILED,
        "handshake_timeout": Verdict.HANDSHAKE_TIMEOUT,
        "incompatible_protocol": Verdict.INCOMPATIBLE_PROTOCOL,
        "unauthenticated": Verdict.CREDENTIAL_UNVERIFIED,
    }
)
"""The seed's readiness reasons in this vocabulary."""

# Where a PATH line goes so that the shell sshd runs without a terminal reads it.
_RC_FILE: Final[Mapping[str, str]] = MappingProxyType(
    {
        "bash": "~/.bashrc, above its interactivity guard (the lines that return when not interactive)",
        "zsh": "~/.zshenv",
        "fish": "~/.config/fish/config.fish, outside any 'status is-interactive' block",
        "sh": "the file your shell reads without a terminal (ENV)",
    }
)


@dataclass(frozen=True, slots=True)
class Judgement:
    """One verdict with what a person needs: ``message`` says what is wrong (or, for ``ready``,
    what was found), ``fix`` what to do about it when there is one thing to do."""

    verdict: Verdict
    message: str
    fix: str | None = None
    cause: Cause | None = None
    """Why, in :mod:`hostinv.causes`' vocabulary; ``None`` for ``ready`` (see :attr:`why`)."""

    @property
    def ready(self) -> bool:
        return self.verdict is Verdict.READY

    @property
    def why(self) -> Cause | None:
        """:attr:`cause`, else the verdict's commonest cause (``None`` for ``ready``)."""
        return self.cause if self.cause is not None else VERDICT_CAUSE.get(self.verdict)


def _workspace_problem(report: ProbeReport, workspace: str) -> Judgement | None:
    shown = repr(workspace)
    if report.workspace == "missing":
        return Judgement(
            Verdict.WORKSPACE_INVALID,
            f"the workspace {shown} does not exist on the host",
            fix_for(Cause.WORKSPACE_INVALID, workspace=workspace),
        )
    if report.workspace == "not_dir":
        return Judgement(
            Verdict.WORKSPACE_INVALID,
            f"the workspace {shown} exists on the host but is not a directory",
            "pass a directory as the workspace",
        )
    if report.workspace == "dir" and report.workspace_writable is False:
        return Judgement(
            Verdict.WORKSPACE_INVALID,
            f"the workspace {shown} is not writable (or not enterable) by the login user",
            "give the login user write and execute permission on it, or pass another workspace",
        )
    return None


def _agent_problem(report: ProbeReport, agent: str) -> Judgement | None:
    if report.agent_found is False:
        if report.login == "found" and report.login_dir:
            shell = (report.shell or "").rsplit("/", 1)[-1]
            where = _RC_FILE.get(shell, "the file your login shell reads when run without a terminal")
            return Judgement(
                Verdict.AGENT_NOT_FOUND,
                f"{agent!r} is not on the PATH a session gets, but an interactive login shell finds it in "
                f"{report.login_dir} (it works when you ssh in, not in a session)",
                f"add {report.login_dir} to PATH in {where}, or give the agent's full path: "
                f"{report.login_dir.rstrip('/')}/{agent}",
            )
        if "/" in agent:
            return Judgement(
                Verdict.AGENT_NOT_FOUND,
                f"{agent!r} is not an executable file on the host",
                "install the agent there, or give the path where it is installed",
            )
        hint = {
            "timeout": "; the login shell did not answer in time, so its PATH was not checked",
            "failed": "; the login shell printed no PATH, so its PATH was not checked",
            "no_shell": "; the login shell is unknown, so its PATH was not checked",
        }.get(report.login or "", ", nor on an interactive login shell's" if report.login == "missing" else "")
        return Judgement(
            Verdict.AGENT_NOT_FOUND,
            f"{agent!r} is not on the PATH a session gets ({report.path or 'PATH unset'}){hint}",
            fix_for(Cause.AGENT_NOT_FOUND),
        )
    if report.agent_found and report.agent_exit in (126, 127):
        said = f": {report.agent_version}" if report.agent_version else ""
        why = "cannot be executed" if report.agent_exit == 126 else "does not start (a missing interpreter?)"
        return Judgement(
            Verdict.AGENT_FAILED,
            f"{agent!r} ({report.agent_path}) {why}; '--version' exited {report.agent_exit}{said}",
            "reinstall the agent or what it runs on (for a script: the interpreter on its #! line)",
        )
    return None


def judge_report(report: ProbeReport, agent: str, workspace: str = "", *, capacity: int | None = None) -> Judgement:
    """The probe-level verdict for ``agent`` (the program name or path probed) and ``workspace``
    (as probed, for the message): ``workspace_invalid``, ``agent_not_found``, ``agent_failed``,
    ``at_capacity`` (with ``capacity``: the report counts that many slots held or more; a host
    that cannot count its slots is not judged on them) or ``ready`` (meaning: ready as far as a
    probe can tell; the handshake may say more).

    An agent whose ``--version`` timed out or exited otherwise is not judged on it: many agents
    answer no ``--version`` quickly, or at all, and still run.
    """
    problems = [p for p in (_workspace_problem(report, workspace), _agent_problem(report, agent)) if p]
    if problems:
        first = problems[0]
        if len(problems) == 1:
            return first
        others = "; ".join(f"{p.verdict}: {p.message}" for p in problems[1:])
        return Judgement(first.verdict, f"{first.message} (also {others})", first.fix, first.cause)
    if capacity is not None and report.slots_unusable:
        return Judgement(
            Verdict.AT_CAPACITY,
            f"its agent slots directory {report.slot_dir or ''} is a link, not a directory, or another user's: "
            "no session can take a slot",
            fix_for(Cause.SLOTS_UNUSABLE, slot_dir=report.slot_dir),
            Cause.SLOTS_UNUSABLE,
        )
    held = report.slots_held
    if capacity is not None and held is not None and held >= capacity:
        return Judgement(
            Verdict.AT_CAPACITY,
            f"{held} agent{'s' if held != 1 else ''} already run there, its capacity is {capacity}",
            fix_for(Cause.AT_CAPACITY),
            Cause.AT_CAPACITY,
        )
    version = report.agent_version if report.agent_exit == 0 else None
    if report.agent_timed_out:
        version = "its --version did not answer in time"
    facts = ", ".join(
        fact
        for fact in (
            (agent if report.agent_path == agent else f"{agent} at {report.agent_path}") if report.agent_path else None,
            version,
            f"{report.os} {report.arch}" if report.os and report.arch else None,
        )
        if fact
    )
    return Judgement(Verdict.READY, facts or "ready")


def judge_probe_error(error: ProbeReportError, stderr_tail: str = "") -> Judgement:
    """``probe_failed`` for a probe whose output held no whole report; ``stderr_tail`` (masked by
    the caller) is added, since a login that refused to run the probe says why there."""
    said = error.output_tail or stderr_tail
    detail = f"; it said: {said[-200:]}" if said else ""
    if isinstance(error, ReportCutShortError):
        return Judgement(
            Verdict.PROBE_FAILED, f"{error}{detail}", fix_for(Cause.PROBE_INCOMPLETE), Cause.PROBE_INCOMPLETE
        )
    return Judgement(
        Verdict.PROBE_FAILED,
        f"{error}{detail}",
        fix_for(Cause.LOGIN_REFUSED),
        Cause.LOGIN_REFUSED,
    )

"""``hostinv``'s probe run inside the handshake's own login: one login per host for a full check.

A check with the handshake needs both halves: the probe's facts (OS, cores, load, disk, the
agent's path and version, the slots held) and a real session start. Logging in twice (asyncssh
for the probe, then OpenSSH for the session) costs a host two key exchanges, two
authentications and two sshd processes, which on a fleet is most of the check. So the probe's
script runs as the session's :class:`~remote_acp.targets.ssh.target.Preflight`: the session script runs
it before it enters the workspace, its report reaches the client ahead of the ready marker, and
:meth:`LoginProbe.admit` reads it with ``hostinv``'s own :meth:`~hostinv.probes.HostProbe.from_output`. A host the probe
finds not ready starts no agent (the go-ahead is refused); a ready one goes on to
``initialize`` and ``session/new`` in the same login.

The probe is the same script, read by the same parser and judged by the same rules as over
asyncssh, so a verdict does not depend on which way it was taken. What differs is the login:
OpenSSH's, the one a session makes, so connection problems are read from ssh's own words
(:func:`~remote_acp.fleet.check.handshake_judgement`).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from hostinv.probes import HostProbe, Verdict, probe_script

from ..errors import ErrorFacts, ErrorKind, RemoteAcpError

if TYPE_CHECKING:
    from hostinv import Host

__all__ = ["LoginProbe", "PROBE_MARGIN_S"]

PROBE_MARGIN_S: Final = 5
"""Seconds the probe may take beyond the bounds of what it runs (``--version``, the login shell)."""

# The session error a refusal raises, for a library caller reading the start's failure.
_REFUSAL_KIND: Final = {
    Verdict.AGENT_NOT_FOUND: ErrorKind.AGENT_NOT_FOUND,
    Verdict.WORKSPACE_INVALID: ErrorKind.INVALID_WORKSPACE_CWD,
}


@dataclass(slots=True)
class LoginProbe:
    """The probe of ``host`` for ``agent`` in ``workspace``, as a session's preflight.

    After the session's start, :attr:`result` holds the probe's result when its report came
    back (``None``: the login never got that far, or the probe never finished).
    """

    host: Host
    agent: str
    workspace: str
    version_timeout_s: int = 2
    login_timeout_s: int = 3
    login_lookup: bool = True
    slot_prefix: str = ""
    script: str = field(init=False)
    bound_ms: int = field(init=False)
    started: float = field(default_factory=time.monotonic, init=False)
    result: HostProbe | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        bounds = (self.version_timeout_s, self.login_timeout_s)
        self.script = _script(self.agent, self.workspace, *bounds, self.login_lookup, self.slot_prefix)
        self.bound_ms = (self.version_timeout_s + self.login_timeout_s + PROBE_MARGIN_S) * 1000

    def admit(self, printed: bytes) -> RemoteAcpError | None:
        """Read what the probe printed into :attr:`result`: ``None`` when the host is ready (the
        go-ahead), else the session error that refuses it."""
        found = self.result = HostProbe.from_output(
            self.host,
            printed.decode("utf-8", "replace"),
            self.agent,
            self.workspace,
            slots_counted=bool(self.slot_prefix),
            latency_s=time.monotonic() - self.started,
        )
        if found.ready:
            return None
        kind = _REFUSAL_KIND.get(found.verdict, ErrorKind.PORT_EXIT)
        facts = ErrorFacts(  # what the cause's fix names (the workspace to create, the slots to remove)
            host=self.host.name,
            destination=self.host.destination,
            workspace=self.workspace,
            slot_dir=found.report.slot_dir if found.report is not None else None,
        )
        said = f"the host's probe found it not ready: {found.message}"
        return RemoteAcpError(kind, said, cause=found.cause, facts=facts)


@functools.lru_cache(maxsize=64)
def _script(
    agent: str, workspace: str, version_timeout_s: int, login_timeout_s: int, login_lookup: bool, slot_prefix: str
) -> str:
    """The probe's script: the same for every host and every placement of one agent and workspace,
    so a pool placing many sessions (or a check of many hosts) writes it once, not per login."""
    return probe_script(
        agent,
        workspace,
        version_timeout_s=version_timeout_s,
        login_timeout_s=login_timeout_s,
        login_lookup=login_lookup,
        version_lookup=False,  # the handshake's initialize names the version; one agent start, not two
        slot_prefix=slot_prefix,
    )

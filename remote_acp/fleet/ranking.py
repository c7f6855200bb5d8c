"""The pure half of placement: how hosts rank by their probes, and the error when none takes a session.

:class:`~remote_acp.fleet.pool.HostPool` feeds these its view of the hosts; they do no I/O.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

from hostinv.causes import CAUSES
from hostinv.probes import Verdict

from ..errors import Cause, ErrorFacts, ErrorKind, PlacementAttempt, RemoteAcpError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from hostinv import Host
    from hostinv.probes import HostProbe

__all__ = ["free_slots", "placement_error", "rank_hosts", "unplaced_error"]

# The session error kind a probe's verdict stands for, when the probe already refused the host.
_VERDICT_KIND: Final = {
    Verdict.AGENT_NOT_FOUND: ErrorKind.AGENT_NOT_FOUND,
    Verdict.WORKSPACE_INVALID: ErrorKind.INVALID_WORKSPACE_CWD,
    Verdict.CREDENTIAL_UNVERIFIED: ErrorKind.CREDENTIAL_UNVERIFIED,
    Verdict.HANDSHAKE_TIMEOUT: ErrorKind.RESPONSE_TIMEOUT,
    Verdict.INCOMPATIBLE_PROTOCOL: ErrorKind.RESPONSE_ERROR,
}


MAX_CORES: Final = 4096
"""More cores than any host has: a report claiming more is not believed for ranking."""


def free_slots(host: Host, probe: HostProbe, since: int) -> int | None:
    """Free slots by ``probe``, less ``since`` sessions started there after it; ``None``: no slot
    for this host (not ready). A host that cannot count its slots is taken to have them all."""
    report = probe.report
    full = probe.verdict is Verdict.AT_CAPACITY and probe.cause in (None, Cause.AT_CAPACITY)
    if not (probe.verdict is Verdict.READY or (full and report is not None and report.slots_held is not None)):
        return None  # not ready (a host found full may have a slot free since: it is counted)
    held = (report.slots_held or 0) if report is not None else 0
    return host.capacity - max(0, held + since)


def rank_hosts(probes: Sequence[HostProbe], opened: Mapping[str, int] | None = None) -> list[Host]:
    """The ready hosts of ``probes``, best first: a free agent slot first, then the lowest load
    per core, then the most free slots, then the order given (the inventory's). Pure.

    A host's free slots are its capacity less the slots its probe counted held, less
    ``opened[name]`` (sessions started there since the probe; negative when some ended). A host
    found at capacity counts as ready with no slot free (sessions ended since may free one). A
    host that cannot count its slots (no ``/proc/locks``) is taken to have them all free: its own
    slots still refuse a start past its capacity.
    """
    opened = opened or {}
    ranked: list[tuple[bool, float, int, int, Host]] = []
    for index, probe in enumerate(probes):
        free = free_slots(probe.host, probe, opened.get(probe.host.name, 0))
        if free is None:
            continue
        report = probe.report
        per_core = report.load_per_core if report is not None else None
        if report is not None and (report.cores or 0) > MAX_CORES:
            per_core = None  # figures no machine has: what the host says of its load is not taken
        ranked.append((free <= 0, math.inf if per_core is None else per_core, -free, index, probe.host))
    ranked.sort(key=lambda entry: entry[:4])
    return [entry[4] for entry in ranked]


def unplaced_error(
    hosts: Sequence[Host],
    probes: Mapping[str, HostProbe],
    free: Mapping[str, int],
    failed: Sequence[tuple[Host, RemoteAcpError]],
) -> RemoteAcpError:
    """The error of a placement that found no host: every start it tried (``failed``, in order)
    and why each other host was not tried, by its probe, or by ``free`` (the free slots of the
    hosts with room for the session by the pool's count)."""
    tried = {host.name for host, _ in failed}
    attempts = [
        PlacementAttempt(host.name, host.destination, e.kind, e.cause, e.retryable, str(e)) for host, e in failed
    ]
    for host in hosts:
        if host.name in tried:
            continue
        if host.name in free:  # it had room: every slot was held, or the attempts were used up
            if free[host.name] > 0:
                why, cause = f"not tried: the placement's {len(failed)} attempts were used", Cause.NO_HOST_AVAILABLE
            else:
                count = host.capacity - free[host.name]
                sessions = "1 session" if count == 1 else f"{count} sessions"
                why = f"at_capacity ({sessions} there by the pool's count, its capacity is {host.capacity})"
                if probes[host.name].verdict is Verdict.AT_CAPACITY and free[host.name] == 0:
                    why = f"at_capacity ({probes[host.name].message})"  # the host's own count
                cause = Cause.AT_CAPACITY
            attempts.append(PlacementAttempt(host.name, host.destination, ErrorKind.PORT_EXIT, cause, True, why))
            continue
        probe = probes[host.name]
        cause = probe.cause or Cause.CONNECT_FAILED
        kind = _VERDICT_KIND.get(probe.verdict, ErrorKind.PORT_EXIT)
        said = f"{probe.verdict} ({probe.message})"
        attempts.append(PlacementAttempt(host.name, host.destination, kind, cause, CAUSES[cause].retryable, said))
    if failed:
        headline = f"the session could not start on any of the {len(hosts)} hosts ({len(failed)} tried)"
    else:
        headline = f"no host of the {len(hosts)} in the pool is ready"
    return placement_error(attempts, headline)


def placement_error(attempts: Sequence[PlacementAttempt], headline: str) -> RemoteAcpError:
    """The error of a placement that found no host for its session, from every host's attempt.

    When every host failed for one cause, the placement ends as each host did: that kind and
    cause (a workspace missing everywhere is ``invalid_workspace_cwd``, exit 3, as without a
    pool). Else it is ``port_exit`` with the cause ``no_host_available``, retryable when a retry
    can help on at least one host (one at capacity, one down), else the first host's permanent
    cause. The attempts are its facts.
    """
    said = "; ".join(f"{a.host}: [{a.cause}] {a.message}" for a in attempts)
    causes = {a.cause for a in attempts}
    if len(causes) == 1:
        first = attempts[0]
        kind, cause = first.kind, first.cause
    else:
        kind = ErrorKind.PORT_EXIT
        # Else no host can take the session without a change: the first host's reason is the
        # cause (every one is in the facts), so the error stays not retryable.
        cause = Cause.NO_HOST_AVAILABLE if any(a.retryable for a in attempts) else attempts[0].cause
    return RemoteAcpError(kind, f"{headline}: {said}", cause=cause, facts=ErrorFacts(attempts=tuple(attempts)))

"""Sessions placed on the fleet: a pool of hosts that hands out sessions on ready ones.

:class:`HostPool` probes its hosts (``hostinv``: login, workspace, agent, load, the agent slots
held), ranks the ready ones (:func:`rank_hosts`: a free slot first, then the lowest load per
core, then the most free slots, then inventory order) and starts the session on the first. A
start that fails with a retryable kind (the host went down, its slots filled since the probe,
the agent died starting) falls over to the next host, at most ``max_attempts`` hosts in all; a
permanent failure (a workspace path no host could take, a refused credential) is raised as it is.

Capacity holds across processes because it is kept on the hosts: every session the pool starts
takes one of its host's agent slots there (:attr:`~remote_acp.targets.ssh.SshSettings.capacity`,
lock files the kernel releases when the session's processes end), so two schedulers sharing a
fleet never run more agents on a host than its capacity, with no coordinator. The ranking's own
count is an estimate (the probe's count, adjusted by the sessions this pool opened and closed
since); the host's slots are the truth.
"""

from __future__ import annotations

import contextlib
import math
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from hostinv.causes import CAUSES
from hostinv.probes import ProbeSettings, Verdict

from ..errors import Cause, ErrorFacts, ErrorKind, PlacementAttempt, RemoteAcpError
from ..logs import get_logger
from ..session.core import open_session
from ..targets.ssh import SshSettings
from ..targets.ssh_script import SLOT_DIR_PREFIX
from .cache import resolve_cache_dir
from .check import host_target

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

    from hostinv import Host
    from hostinv.probes import HostProbe

    from ..options import SessionOptions
    from ..session.core import Session
    from .report import ProbeResult

__all__ = ["Attempt", "HostPool", "Placement", "rank_hosts"]

log = get_logger("remote_acp.fleet.pool")

DEFAULT_MAX_ATTEMPTS: Final = 3
# The session error kind a probe's verdict stands for, when the probe already refused the host.
_VERDICT_KIND: Final = {
    Verdict.AGENT_NOT_FOUND: ErrorKind.AGENT_NOT_FOUND,
    Verdict.WORKSPACE_INVALID: ErrorKind.INVALID_WORKSPACE_CWD,
    Verdict.CREDENTIAL_UNVERIFIED: ErrorKind.CREDENTIAL_UNVERIFIED,
    Verdict.HANDSHAKE_TIMEOUT: ErrorKind.RESPONSE_TIMEOUT,
    Verdict.INCOMPATIBLE_PROTOCOL: ErrorKind.RESPONSE_ERROR,
}


@dataclass(frozen=True, slots=True)
class Attempt:
    """A host the pool tried before the one it placed the session on, and why it failed there."""

    host: Host
    error: RemoteAcpError


@dataclass(frozen=True, slots=True)
class Placement:
    """A session the pool started: where it runs, and the hosts tried first (in order)."""

    host: Host
    session: Session
    failed: tuple[Attempt, ...] = ()


def rank_hosts(probes: Sequence[ProbeResult], opened: Mapping[str, int] | None = None) -> list[Host]:
    """The ready hosts of ``probes``, best first: a free agent slot first, then the lowest load
    per core, then the most free slots, then the order given (the inventory's). Pure.

    A host's free slots are its capacity less the slots its probe counted held, less
    ``opened[name]`` (sessions started there since the probe; negative when some ended). A host
    that cannot count its slots (no ``/proc/locks``) is taken to have them all free: its own
    slots still refuse a start past its capacity.
    """
    opened = opened or {}
    ranked: list[tuple[bool, float, int, int, Host]] = []
    for index, probe in enumerate(probes):
        if probe.verdict is not Verdict.READY:
            continue
        host, report = probe.host, probe.report
        held = (report.slots_held or 0) if report is not None else 0
        free = host.capacity - max(0, held + opened.get(host.name, 0))
        per_core = report.load_per_core if report is not None else None
        ranked.append((free <= 0, math.inf if per_core is None else per_core, -free, index, host))
    ranked.sort(key=lambda entry: entry[:4])
    return [entry[4] for entry in ranked]


@dataclass
class _Probed:
    results: list[HostProbe]
    at: float
    opened_then: Counter[str]


@dataclass
class HostPool:
    """Hosts that sessions are placed on (see the module docstring).

    ``settings``: how ``ssh`` runs for every session (each host's inventory settings and capacity
    are added to them). ``probe_settings``: how hosts are probed (default: the same ssh_config and
    host key policy, and the agent slots counted). ``probe_max_age_s``: how long a probe of the
    hosts is reused for later placements (0: every placement probes again). ``max_attempts``:
    hosts tried per placement.
    """

    hosts: Sequence[Host]
    settings: SshSettings = field(default_factory=SshSettings)
    probe_settings: ProbeSettings | None = None
    probe_max_age_s: float = 0.0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    concurrency: int = 32
    _opened: Counter[str] = field(default_factory=Counter, init=False, repr=False)
    _probed: dict[tuple[str, str], _Probed] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.hosts:
            raise ValueError("a host pool needs at least one host")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.probe_settings is None:
            policy = self.settings.host_key_policy
            self.probe_settings = ProbeSettings(
                ssh_config=self.settings.config_file,
                host_key_policy="yes" if policy == "yes" else "accept-new",
                connect_timeout_s=float(self.settings.connect_timeout_s),
                slot_prefix=SLOT_DIR_PREFIX,
                resolve_cache=str(resolve_cache_dir()),
            )

    @property
    def opened(self) -> Mapping[str, int]:
        """Sessions this pool holds open now, by host name."""
        return {name: count for name, count in self._opened.items() if count}

    async def probe(self, agent_program: str, workspace: str) -> list[HostProbe]:
        """Every host's probe for ``agent_program`` in ``workspace``, reused while fresh."""
        from hostinv.probes import probe_hosts

        key = (agent_program, workspace)
        kept = self._probed.get(key)
        if kept is not None and time.monotonic() - kept.at <= self.probe_max_age_s:
            return kept.results
        assert self.probe_settings is not None
        results = await probe_hosts(
            self.hosts, agent_program, workspace, self.probe_settings, concurrency=self.concurrency
        )
        self._probed[key] = _Probed(results, time.monotonic(), Counter(self._opened))
        return results

    async def rank(self, agent_program: str, workspace: str) -> list[Host]:
        """The ready hosts, best first (:func:`rank_hosts`), from a fresh (or reused) probe."""
        results = await self.probe(agent_program, workspace)
        then = self._probed[(agent_program, workspace)].opened_then
        since = {name: self._opened[name] - then[name] for name in {*self._opened, *then}}
        return rank_hosts(results, since)

    @contextlib.asynccontextmanager
    async def session(
        self, workspace: str, options: SessionOptions, *, resume: str | None = None
    ) -> AsyncIterator[Placement]:
        """A session of ``options.command`` in ``workspace`` on the best ready host, closed on exit.

        :raises RemoteAcpError: the start's own error when it is permanent; else, when no host
            was ready or every host tried failed, ``port_exit`` naming each host and why (retryable
            when waiting can help: hosts at capacity, down, or failing for a retryable reason).
        """
        program = _program(options.command)
        order = await self.rank(program, workspace)
        if not order:
            raise self._none_ready(program, workspace)
        failed: list[Attempt] = []
        async with contextlib.AsyncExitStack() as stack:
            for host in order[: self.max_attempts]:
                try:
                    target = host_target(host, self.settings, take_slot=True)
                    session = await stack.enter_async_context(open_session(workspace, options, target, resume=resume))
                except ValueError as exc:  # the host's ssh options in the inventory: ssh never ran
                    failed.append(
                        Attempt(host, RemoteAcpError(ErrorKind.PORT_EXIT, str(exc), cause=Cause.SSH_CONFIG_INVALID))
                    )
                    continue
                except RemoteAcpError as exc:
                    if not exc.retryable:
                        raise
                    log.warning("could not start the session, trying another host: %s", exc, extra={"host": host.name})
                    failed.append(Attempt(host, exc))
                    continue
                self._opened[host.name] += 1
                stack.callback(self._closed, host.name)
                yield Placement(host, session, tuple(failed))
                return
        raise _all_failed(failed)

    def _closed(self, name: str) -> None:
        self._opened[name] -= 1

    def _none_ready(self, program: str, workspace: str) -> RemoteAcpError:
        results = self._probed[(program, workspace)].results
        return placement_error(
            [
                PlacementAttempt(
                    r.host.name,
                    r.host.destination,
                    _VERDICT_KIND.get(r.verdict, ErrorKind.PORT_EXIT),
                    r.cause or Cause.CONNECT_FAILED,
                    CAUSES[r.cause or Cause.CONNECT_FAILED].retryable,
                    f"{r.verdict} ({r.message})",
                )
                for r in results
            ],
            f"no host of the {len(results)} in the pool is ready",
        )


def _attempt(attempt: Attempt) -> PlacementAttempt:
    error = attempt.error
    return PlacementAttempt(
        attempt.host.name, attempt.host.destination, error.kind, error.cause, error.retryable, str(error)
    )


def _all_failed(failed: list[Attempt]) -> RemoteAcpError:
    return placement_error(
        [_attempt(a) for a in failed], f"the session could not start on any of the {len(failed)} hosts tried"
    )


def placement_error(attempts: Sequence[PlacementAttempt], headline: str) -> RemoteAcpError:
    """The error of a placement that found no host for its session, from every host's attempt.

    When every host failed for one cause, the placement ends as each host did: that kind and
    cause (a workspace missing everywhere is ``invalid_workspace_cwd``, exit 3, as without a
    pool). Else it is ``port_exit`` with the cause ``no_host_available``, retryable when a retry
    can help on at least one host (one at capacity, one down). The attempts are its facts.
    """
    said = "; ".join(f"{a.host}: [{a.cause}] {a.message}" for a in attempts)
    causes = {a.cause for a in attempts}
    if len(causes) == 1:
        first = attempts[0]
        kind, cause = first.kind, first.cause
    else:
        kind = ErrorKind.PORT_EXIT
        retry = any(a.retryable for a in attempts)
        cause = Cause.NO_HOST_AVAILABLE if retry else _first_permanent(attempts)
    return RemoteAcpError(kind, f"{headline}: {said}", cause=cause, facts=ErrorFacts(attempts=tuple(attempts)))


def _first_permanent(attempts: Sequence[PlacementAttempt]) -> Cause:
    # No host can take the session without a change: name the first host's reason as the cause
    # (every one is in the facts), so the error stays not retryable.
    return attempts[0].cause


def _program(command: str | Sequence[str]) -> str:
    """The agent program (what a probe looks for): the command's first word."""
    try:
        words = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError as exc:  # an unbalanced quote
        raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, f"the agent command does not read as words: {exc}") from None
    if not words:
        raise RemoteAcpError(ErrorKind.AGENT_NOT_FOUND, "the agent command is empty or whitespace-only")
    return words[0]

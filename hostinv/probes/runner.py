"""Probing hosts over asyncssh: one connection per host, one channel, one verdict, never a prompt.

For each host the runner asks ``ssh -G`` what ``ssh`` would use (:mod:`hostinv.sshopts`: HostName,
Port, User, IdentityFile, ProxyJump, known_hosts files, HashKnownHosts, through every
``Host``/``Match``/``Include`` and the system config), with the :class:`~hostinv.models.Host`
fields as command-line overrides, then gives asyncssh all of it explicitly and no config file.
It logs in with keys only (the files ssh would offer and, unless ``IdentitiesOnly``, the
ssh-agent; encrypted keys it cannot open are skipped, never asked about), forwards no agent,
runs :data:`~hostinv.probes.PROBE_COMMAND` with :func:`~hostinv.probes.probe_script` on stdin,
and judges the report. Jump hosts (``ProxyJump``, each hop resolved and checked the same way) are
connections of their own.

Host keys (:mod:`.host_keys`) follow ``SshTarget``'s policy. asyncssh trusts the keys the known_hosts files hold for
the host; a key they do not hold is decided by :class:`HostKeyCheck`: when the files hold another key for the host it
is ``host_key_changed`` (refused, with the exact ``ssh-keygen -R`` line), else under ``yes``
``host_key_unknown``, and under ``accept-new`` the key is appended to the first
``UserKnownHostsFile`` as ssh would (hashed when ``HashKnownHosts`` says so), so a later ``ssh``
or session finds it known.

Nothing here raises for a host's problem: every failure is a :class:`HostProbe` with a verdict.
asyncssh is imported on the first probe, never when :mod:`hostinv` is imported.

Event loops: asyncssh runs on asyncio only. Called from asyncio, the probes run on the caller's
loop; called from any other loop anyio runs on (trio), they run on an asyncio loop of their own in
a worker thread, which a cancelled caller cancels and waits for, so nothing outlives the call.

Concurrency: :func:`probe_hosts` bounds the connections in flight with one semaphore. Every host
gets one connection, so a host sees one handshake per inventory entry; entries sharing an address
are held to :data:`PER_ADDRESS` at once. A jump host shared by many targets sees one per target
behind it, and sshd's ``MaxStartups`` (10 unauthenticated by default) may drop some past that
(``unreachable``, "closed before login"): keep ``concurrency`` near 8 behind one jump host.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .. import resolve_cache
from ..causes import Cause, fix_for, ssh_words
from ..sshopts import ResolvedSsh, existing, parse_jump, parse_ssh_g, probe_ciphers, ssh_g_argv
from .command import PROBE_COMMAND, probe_script
from .host_keys import HostKeyCheck, parsed_known_hosts
from .loops import on_asyncio, on_own_loop
from .parse import ProbeReport, ProbeReportError, parse_report
from .verdicts import Judgement, Verdict, judge_probe_error, judge_report

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..models import Host

__all__ = [
    "PER_ADDRESS",
    "HostKeyCheck",
    "HostProbe",
    "ProbeSettings",
    "judge_connect_error",
    "probe_host",
    "probe_hosts",
]

_SSH_G_TIMEOUT_S = 10.0
_SSH_CHATTER = ("debug", "OpenSSH_", "Pseudo-terminal")  # -v's lines, not why ssh -G failed
PER_ADDRESS = 8
"""Probes at once to one address (two inventory names for one host), below sshd's default
``MaxStartups`` of 10 unauthenticated connections, past which it drops new ones at random."""


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    """How probes connect. ``ssh_config``: a file read instead of ssh's usual ones (as ``ssh -F``);
    ``None``: what ``ssh`` reads (``~/.ssh/config``, then the system file). ``known_hosts``: the
    file to read and add keys to instead of ``UserKnownHostsFile``. ``command_timeout_s`` bounds
    the whole probe after login; ``version_timeout_s`` the agent's ``--version`` within it (whole
    seconds on the host, rounded up). ``login_lookup``: ask the login shell for its PATH when the
    agent is not on the session's (it runs the user's profile). ``slot_prefix``: where sessions
    keep the host's agent slots, less the user id (the session layer's convention); set, the
    probe counts the slots held and a host with as many as its capacity is ``at_capacity``.
    ``resolve_cache``: a directory where ``ssh -G``'s answers are kept while the files ssh read
    are unchanged (:mod:`hostinv.resolve_cache`); ``None``: ask ssh every time."""

    connect_timeout_s: float = 10.0
    command_timeout_s: float = 20.0
    ssh_config: str | None = None
    host_key_policy: Literal["accept-new", "yes"] = "accept-new"
    known_hosts: str | None = None
    version_timeout_s: float = 2.0
    login_lookup: bool = True
    slot_prefix: str = ""
    resolve_cache: str | None = None


@dataclass(frozen=True, slots=True)
class HostProbe:
    """One host's outcome. ``report`` is the probe's report when one came back whole;
    ``latency_s`` runs from the start of the connection to the end of the probe."""

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


def _mask(text: str, limit: int = 300) -> str:
    text = "".join(c if c.isprintable() or c == " " else " " for c in text.replace("\n", " | "))
    return text.strip()[-limit:]


def judge_connect_error(
    exc: BaseException,
    *,
    destination: str,
    address: str,
    port: int,
    connect_timeout_s: float,
    key_check: HostKeyCheck | None = None,
    via: str | None = None,
) -> Judgement:
    """The verdict for an exception raised before login (resolving, connecting, host key,
    authentication). Pure: ``exc`` is asyncssh's, an ``OSError`` or a timeout. ``via``: the jump
    host the connection went through, if any."""
    at = f"{address}:{port}" + (f" (through the jump host {via})" if via else "")
    name = type(exc).__name__
    if key_check is not None and key_check.outcome == "changed":
        return Judgement(
            Verdict.HOST_KEY_CHANGED,
            f"{destination} ({key_check.resolved.known_hosts_name}) offered a host key other than the one "
            f"{key_check.found_in} holds for it: a reinstalled host, or someone in between; refused",
            fix_for(
                Cause.HOST_KEY_CHANGED,
                known_hosts=key_check.found_in or (key_check.read_files[0] if key_check.read_files else None),
                key_name=key_check.resolved.known_hosts_name,
            ),
            Cause.HOST_KEY_CHANGED,
        )
    if key_check is not None and key_check.outcome == "unknown":
        return Judgement(
            Verdict.HOST_KEY_UNKNOWN,
            f"{destination} ({key_check.resolved.known_hosts_name}) offered a key no known_hosts file holds, "
            "and the host key policy is 'yes' (or the file cannot be written)",
            fix_for(
                Cause.HOST_KEY_UNKNOWN,
                ssh_target=ssh_words(_bare(destination), port if port != 22 else None),
                known_hosts=key_check.write_file,
            ),
            Cause.HOST_KEY_UNKNOWN,
        )
    if name == "HostKeyNotVerifiable":
        if "revoked" in str(exc):
            return Judgement(
                Verdict.HOST_KEY_CHANGED,
                f"{destination} offered a revoked host key: {exc}",
                fix_for(Cause.HOST_KEY_CHANGED),
                Cause.HOST_KEY_CHANGED,
            )
        return Judgement(
            Verdict.HOST_KEY_UNKNOWN,
            f"{destination}: {exc}",
            fix_for(Cause.HOST_KEY_UNKNOWN, ssh_target=ssh_words(_bare(destination), port if port != 22 else None)),
            Cause.HOST_KEY_UNKNOWN,
        )
    if name == "PermissionDenied":
        return Judgement(
            Verdict.AUTH_FAILED,
            f"sshd on {at} refused every key offered for the user (keys only, never a password; encrypted "
            "keys are used only through ssh-agent)",
            fix_for(Cause.AUTH_FAILED, ssh_target=ssh_words(_bare(destination), port if port != 22 else None)),
            Cause.AUTH_FAILED,
        )
    if isinstance(exc, socket.gaierror):
        return Judgement(
            Verdict.UNREACHABLE,
            f"the name {address!r} did not resolve ({exc.strerror or exc})",
            fix_for(Cause.NAME_UNRESOLVED),
            Cause.NAME_UNRESOLVED,
        )
    if name == "ChannelOpenError":
        return Judgement(
            Verdict.UNREACHABLE,
            f"the jump host could not open a connection to {at}: {exc}",
            "check that the host is up and that the jump host can reach it (its name resolves there)",
        )
    if isinstance(exc, ConnectionRefusedError) or "refused" in str(exc).lower():
        return Judgement(
            Verdict.UNREACHABLE,
            f"{at} refused the connection: nothing listens on that port",
            fix_for(Cause.CONNECT_REFUSED),
            Cause.CONNECT_REFUSED,
        )
    if isinstance(exc, TimeoutError) or name in {"TimeoutError", "CancelledError"}:
        return Judgement(
            Verdict.UNREACHABLE,
            f"{at} did not answer (connect and login within {connect_timeout_s:g} s)",
            fix_for(Cause.CONNECT_TIMEOUT),
            Cause.CONNECT_TIMEOUT,
        )
    if isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN):
        return Judgement(
            Verdict.UNREACHABLE, f"{at} is unreachable: {exc.strerror}", "check the network route to the host"
        )
    if name in {"ConnectionLost", "DisconnectError", "ConnectionResetError", "BrokenPipeError"} or isinstance(
        exc, OSError
    ):
        detail = str(exc) or name
        return Judgement(
            Verdict.UNREACHABLE,
            f"the connection to {at} closed before login ({detail}); sshd may be refusing new connections "
            "(MaxStartups, a ban) or the link dropped",
            fix_for(Cause.CONNECT_FAILED),
            Cause.CONNECT_FAILED,
        )
    return Judgement(
        Verdict.UNREACHABLE,
        f"connecting to {at} failed: {name}: {exc}",
        fix_for(Cause.CONNECT_FAILED),
        Cause.CONNECT_FAILED,
    )


def _bare(destination: str) -> str:
    """``user@host`` of a destination that may end in ``:port`` (the port goes to ``-p``)."""
    head, colon, tail = destination.rpartition(":")
    return head if colon and tail.isdigit() and "]" not in tail else destination


def _asyncssh() -> Any:
    import asyncssh

    return asyncssh


_CLIENT_CLASS: Any = None


def _client_factory(check: HostKeyCheck) -> Callable[[], Any]:
    global _CLIENT_CLASS
    asyncssh = _asyncssh()
    if _CLIENT_CLASS is None:

        class _Client(asyncssh.SSHClient):  # type: ignore[misc, name-defined]
            def __init__(self, check: HostKeyCheck) -> None:
                self._check = check

            def validate_host_public_key(self, host: str, addr: str, port: int, key: Any) -> bool:
                check = self._check
                port_arg = None if check.resolved.host_key_alias else check.resolved.port
                lookup = check.resolved.host_key_alias or check.resolved.hostname

                def holds_key(path: str) -> bool:
                    try:
                        found = asyncssh.match_known_hosts(path, lookup, addr, port_arg)
                    except (OSError, ValueError, asyncssh.Error):
                        return False
                    return bool(found[0] or found[1])

                import base64

                return check.decide(addr, key.algorithm.decode(), base64.b64encode(key.public_data).decode(), holds_key)

        _CLIENT_CLASS = _Client
    client_class = _CLIENT_CLASS
    return lambda: client_class(check)


async def _resolve(
    destination: str,
    settings: ProbeSettings,
    *,
    port: int | None = None,
    user: str | None = None,
    identity_file: str | None = None,
    options: dict[str, str] | None = None,
) -> ResolvedSsh:
    argv = ssh_g_argv(
        destination, config=settings.ssh_config, port=port, user=user, identity_file=identity_file, options=options
    )
    cache, name = settings.resolve_cache, ""
    if cache is not None:
        name = resolve_cache.entry_name(argv, resolve_cache.which_ssh(os.environ), environ=os.environ)
        kept = resolve_cache.lookup(cache, name, os.environ)
        if kept is not None:
            return parse_ssh_g(kept)
        argv = resolve_cache.verbose(argv)
    started = time.time_ns()
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), _SSH_G_TIMEOUT_S)
    except BaseException:
        if process.returncode is None:
            process.kill()
            await process.wait()
        raise
    said = err.decode(errors="replace")
    if process.returncode != 0:
        lines = [line for line in said.splitlines() if line.strip() and not line.startswith(_SSH_CHATTER)]
        raise _ResolveError(lines[0] if lines else f"ssh -G exited {process.returncode}")  # the first says why
    answer = out.decode(errors="replace")
    resolved = parse_ssh_g(answer)
    if cache is not None:
        resolve_cache.keep(
            cache, name, answer, stderr=said, config=settings.ssh_config, environ=os.environ, since_ns=started
        )
    return resolved


class _ResolveError(Exception):
    pass


def _key_check(resolved: ResolvedSsh, settings: ProbeSettings) -> HostKeyCheck:
    user_files = (os.path.expanduser(settings.known_hosts),) if settings.known_hosts else resolved.user_known_hosts
    return HostKeyCheck(
        resolved=resolved,
        policy=settings.host_key_policy,
        read_files=tuple(existing([*user_files, *resolved.global_known_hosts])),
        write_file=user_files[0] if user_files else None,
    )


async def _connect(resolved: ResolvedSsh, check: HostKeyCheck, settings: ProbeSettings, tunnel: Any) -> Any:
    asyncssh = _asyncssh()
    keys = existing(resolved.identity_files)
    return await asyncssh.connect(
        resolved.hostname,
        resolved.port,
        tunnel=tunnel if tunnel is not None else (),
        proxy_command=resolved.proxy_command if tunnel is None and resolved.proxy_command else (),
        username=resolved.user,
        config=None,  # resolved by ssh -G already; asyncssh would read ~/.ssh/config again
        client_factory=_client_factory(check),
        # No file: an empty set, since asyncssh reads ~/.ssh/known_hosts for an empty list.
        known_hosts=parsed_known_hosts(check.read_files, asyncssh.read_known_hosts)
        if check.read_files
        else asyncssh.import_known_hosts(""),
        host_key_alias=resolved.host_key_alias,
        client_keys=keys,
        ignore_encrypted=True,
        agent_path=None if resolved.identities_only else (),
        agent_forwarding=False,
        password=None,
        password_auth=False,
        kbdint_auth=False,
        gss_host=None,
        connect_timeout=settings.connect_timeout_s,
        login_timeout=settings.connect_timeout_s,
        keepalive_interval=0,
        encryption_algs=probe_ciphers(resolved.ciphers, _supported_ciphers()) or (),
    )


def _supported_ciphers() -> list[str]:
    from asyncssh.encryption import get_encryption_algs

    return [alg.decode() for alg in get_encryption_algs()]


def _finish(host: Host, judgement: Judgement, report: ProbeReport | None, started: float) -> HostProbe:
    return HostProbe(
        host, judgement.verdict, judgement.message, judgement.fix, report, time.monotonic() - started, judgement.why
    )


async def probe_host(host: Host, agent: str, workspace: str, settings: ProbeSettings = ProbeSettings()) -> HostProbe:
    """Probe one host for ``agent`` (the program: the first word of the agent command) and
    ``workspace``, on asyncio or trio. Never raises for a host's problem; ``ValueError`` only
    for an agent or workspace the probe cannot carry (empty agent, a NUL byte)."""
    if on_asyncio():
        return await _probe_host(host, agent, workspace, settings)
    return await on_own_loop(lambda: _probe_host(host, agent, workspace, settings))


async def _probe_host(host: Host, agent: str, workspace: str, settings: ProbeSettings) -> HostProbe:
    script = probe_script(
        agent,
        workspace,
        version_timeout_s=max(1, int(-(-settings.version_timeout_s // 1))),
        login_lookup=settings.login_lookup,
        slot_prefix=settings.slot_prefix,
    )
    started = time.monotonic()
    destination = host.address or host.name
    async with AsyncExitStack() as stack:
        tunnel: Any = None
        via: str | None = None
        check: HostKeyCheck | None = None
        resolved: ResolvedSsh | None = None
        shown = host.destination
        try:
            resolved = await _resolve(
                destination,
                settings,
                port=host.port,
                user=host.user,
                identity_file=host.identity_file,
                options=dict(host.ssh_options),
            )
            # Imported only once this host's ssh -G is done: probes start together, so the other
            # hosts' ssh -G run on the other cores meanwhile (the import is most of a start-up).
            asyncssh = _asyncssh()
            for hop in filter(None, (resolved.proxy_jump or "").split(",")):
                hop_host, hop_port, hop_user = parse_jump(hop)
                shown = f"the jump host {hop}"
                hop_resolved = await _resolve(hop_host, settings, port=hop_port, user=hop_user)
                check = _key_check(hop_resolved, settings)
                tunnel = await stack.enter_async_context(await _connect(hop_resolved, check, settings, tunnel))
            shown = host.destination
            via = resolved.proxy_jump.split(",")[-1] if resolved.proxy_jump else None
            check = _key_check(resolved, settings)
            conn = await stack.enter_async_context(await _connect(resolved, check, settings, tunnel))
        except _ResolveError as exc:
            return _finish(
                host,
                Judgement(
                    Verdict.UNREACHABLE,
                    f"ssh could not resolve {destination!r} from its config: {_mask(str(exc))}",
                    fix_for(Cause.SSH_CONFIG_INVALID),
                    Cause.SSH_CONFIG_INVALID,
                ),
                None,
                started,
            )
        except (OSError, _asyncssh().Error) as exc:  # TimeoutError is an OSError
            target = check.resolved if check is not None else resolved
            judgement = judge_connect_error(
                exc,
                destination=shown,
                address=target.hostname if target else destination,
                port=target.port if target else (host.port or 22),
                connect_timeout_s=settings.connect_timeout_s,
                key_check=check,
                via=via,
            )
            return _finish(host, judgement, None, started)
        try:
            result = await conn.run(
                PROBE_COMMAND,
                input=script.encode("utf-8", "surrogateescape"),
                encoding=None,
                check=False,
                timeout=settings.command_timeout_s,
            )
            out, err = result.stdout or b"", result.stderr or b""
            status = result.exit_status
        except asyncssh.TimeoutError as exc:
            out, err, status = exc.stdout or b"", exc.stderr or b"", None
        except (OSError, asyncssh.Error) as exc:
            return _finish(
                host,
                Judgement(
                    Verdict.PROBE_FAILED,
                    f"logged in, but the probe's channel failed: {type(exc).__name__}: {_mask(str(exc))}",
                    fix_for(Cause.PROBE_INCOMPLETE),
                    Cause.PROBE_INCOMPLETE,
                ),
                None,
                started,
            )
    text = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
    err_text = err.decode(errors="replace") if isinstance(err, bytes) else str(err)
    try:
        report = parse_report(text)
    except ProbeReportError as exc:
        judgement = judge_probe_error(exc, _mask(err_text))
        if status is None:
            judgement = Judgement(
                judgement.verdict,
                f"the probe did not finish within {settings.command_timeout_s:g} s; {judgement.message}",
                judgement.fix,
                judgement.cause,
            )
        return _finish(host, judgement, None, started)
    capacity = host.capacity if settings.slot_prefix else None
    return _finish(host, judge_report(report, agent, workspace, capacity=capacity), report, started)


async def probe_hosts(
    hosts: Sequence[Host],
    agent: str,
    workspace: str,
    settings: ProbeSettings = ProbeSettings(),
    *,
    concurrency: int = 32,
    on_done: Callable[[HostProbe], None] | None = None,
) -> list[HostProbe]:
    """Probe ``hosts`` in parallel, at most ``concurrency`` at once, results in input order, on
    asyncio or trio. ``on_done`` is called with each result as it finishes (for progress), in
    the caller's thread."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if on_asyncio():
        return await _probe_hosts(hosts, agent, workspace, settings, concurrency, on_done)
    import anyio
    import anyio.from_thread

    token = anyio.lowlevel.current_token()

    def done_here(result: HostProbe) -> None:  # called in the worker thread
        assert on_done is not None
        anyio.from_thread.run_sync(on_done, result, token=token)

    report = done_here if on_done is not None else None
    return await on_own_loop(lambda: _probe_hosts(hosts, agent, workspace, settings, concurrency, report))


async def _probe_hosts(
    hosts: Sequence[Host],
    agent: str,
    workspace: str,
    settings: ProbeSettings,
    concurrency: int,
    on_done: Callable[[HostProbe], None] | None,
) -> list[HostProbe]:
    limit = asyncio.Semaphore(concurrency)
    per_address: dict[tuple[str, int | None], asyncio.Semaphore] = {}

    async def one(host: Host) -> HostProbe:
        same = per_address.setdefault((host.address or host.name, host.port), asyncio.Semaphore(PER_ADDRESS))
        async with same, limit:
            result = await _probe_host(host, agent, workspace, settings)
        if on_done is not None:
            on_done(result)
        return result

    return list(await asyncio.gather(*(one(h) for h in hosts)))

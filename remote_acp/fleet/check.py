"""The ACP half of checking a host: a real session start through :class:`SshTarget`, read as a verdict.

:func:`check_host` takes a host's probe (``hostinv``'s half: can we log in, is the workspace
there, does the agent resolve) and, when the probe found the host ready, starts the agent the way
a session does: the same ``ssh`` argv, the same login-proof script, ``initialize``, then
``session/new`` through :func:`~remote_acp.session.verification.verify_credentials` (``-32000`` is
``credential_unverified``), then the normal teardown, which deletes (or closes) the verification
session and leaves nothing running on either side. :func:`handshake_judgement` reads the session
error it may end with as one verdict of ``hostinv``'s taxonomy, pure and tested as data.

Words: a *verdict* and a *judgement* are ``hostinv``'s (:mod:`hostinv.probes.verdicts`: the one
word, and the word with its message, fix and cause); an *error kind* is the session error's
:class:`~remote_acp.errors.ErrorKind`, which a check reports beside the verdict
(:attr:`~remote_acp.fleet.report.HostCheck.error_kind`).

With the handshake and no probe in hand, the probe runs inside the handshake's own login
(:class:`~remote_acp.fleet.login_probe.LoginProbe`, ``login_probe``): one login per host, and a
host the probe finds not ready starts no agent.

The handshake's bound is its own: ``initialize`` and ``session/new`` each wait at most the
options' ``read_timeout_ms`` (the CLI sets it, and the initialize floor, from
``--handshake-timeout-ms``), on top of the ssh login's own bound.

A host's inventory settings that ssh takes no flag for (``identity_file``, ``ssh_options``) reach
ssh through a small generated ssh_config (:func:`host_config_text`): a ``Host`` block for the
address with those settings, then the ssh_config ssh would have read. OpenSSH keeps the first
value it obtains, so the inventory wins, as its precedence says.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Final

import anyio

from hostinv.causes import CAUSES, fix_for
from hostinv.probes import PER_ADDRESS, Judgement, Verdict
from hostinv.sshopts import host_block_text, included_files, login_home

from ..errors import Cause, RemoteAcpError
from ..targets.ssh.config import fallback_config_dir, write_fallback_config
from .login_probe import LoginProbe
from .report import HandshakeFacts, HostCheck

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from hostinv import Host
    from hostinv.probes import HostProbe, ProbeSettings

    from ..options import SessionOptions
    from ..session.verification import CredentialVerdict
    from ..targets.ssh.settings import SshSettings
    from ..targets.ssh.target import Preflight, SshTarget
    from .cache import CachedProbe, ProbeCache

__all__ = ["check_host", "check_hosts", "handshake_judgement", "host_config_text", "host_target"]

_KEYWORD: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
# Causes whose error detail (the masked stderr tail, the agent's status) is part of the verdict's
# message; for the others the message says all and the tail is noise.
_WITH_DETAIL: Final = frozenset(
    {
        Cause.CREDENTIAL_REFUSED,
        Cause.NO_ANSWER,
        Cause.AGENT_EXITED,
        Cause.AGENT_KILLED,
        Cause.AGENT_LOST,
        Cause.AGENT_ERROR,
        Cause.SPAWN_FAILED,
        Cause.LOGIN_REFUSED,
        Cause.LOGIN_READS_STDIN,
    }
)


def handshake_judgement(error: RemoteAcpError) -> Judgement:
    """The verdict for a session start that ended with ``error``, its message, and the fix.

    The verdict is the cause's (:data:`hostinv.causes.CAUSES`), the fix the cause's filled with
    the error's facts: one table each, and no message's words read.
    """
    named = CAUSES[error.cause].verdict
    message = str(error) if error.cause in _WITH_DETAIL else error.message
    return Judgement(Verdict(named) if named else Verdict.AGENT_FAILED, message, error.fix or None, error.cause)


def host_config_text(host: Host, config_file: str | None, *, home: str) -> str | None:
    """The ssh_config holding ``host``'s identity file and ssh options for its address, followed by
    what ssh would have read (``config_file``, else ``HOME/.ssh/config`` and the system file);
    ``None`` when the host has neither.

    :raises ValueError: an option that is no ssh keyword, or a value with a line break.
    """
    options: list[tuple[str, str]] = []
    if host.identity_file:  # one path: quoted for ssh_config's parser, its % tokens kept literal
        quoted = re.sub(r"([\\\"'])", r"\\\1", host.identity_file.replace("%", "%%"))
        options.append(("IdentityFile", f'"{quoted}"'))
    options += sorted(host.ssh_options.items())
    if not options:
        return None
    for key, value in options:
        if not _KEYWORD.match(key):
            raise ValueError(f"the ssh option {key!r} of host {host.name!r} is not an ssh_config keyword")
        if any(c in value for c in "\r\n\0"):
            raise ValueError(f"the ssh option {key} of host {host.name!r} holds a line break")
    included = included_files(config_file, home=home)
    return host_block_text(host.address or host.name, options, included, by="remote-acp for an inventory host")


def host_target(
    host: Host, settings: SshSettings, *, take_slot: bool = False, preflight: Preflight | None = None
) -> SshTarget:
    """The :class:`SshTarget` a session on ``host`` would use: its destination, and its inventory
    ssh settings through a generated ssh_config when it has any. ``take_slot``: the session takes
    one of the host's agent slots (its capacity) for its life, as placed sessions do; a check's
    handshake takes none, so checking a fleet never keeps its work from a slot. ``preflight``:
    run in the session's login before the agent starts (a check's probe).

    :raises ValueError: unusable ssh options (see :func:`host_config_text`).
    :raises RemoteAcpError: ``agent_not_found`` when the generated config cannot be written.
    """
    # Here, as the session core and the launch machinery below: a probe-only check starts no
    # session, and loads none of them.
    from ..targets.ssh.target import SshTarget

    config = settings.config_file
    if config is not None and config.lower() != "none":
        config = os.path.abspath(config)
    text = host_config_text(host, config, home=login_home())
    if text is not None:
        path = write_fallback_config(text, fallback_config_dir())
        settings = replace(settings, config_file=str(path))
    return SshTarget(
        host.destination, replace(settings, capacity=host.capacity if take_slot else None), preflight=preflight
    )


def _auth_required(credentials: CredentialVerdict) -> bool:
    """Whether the agent lists authentication methods in its answer to ``initialize``."""
    return bool(credentials.auth_methods)


async def check_host(
    host: Host,
    options: SessionOptions,
    workspace: str,
    *,
    settings: SshSettings,
    handshake: bool = True,
    probe: HostProbe | None,
    login_probe: ProbeSettings | None = None,
    agent_program: str = "",
) -> HostCheck:
    """Check ``host``: the probe's verdict when it is not ``ready``, else (with ``handshake``) the
    verdict of a real session start of ``options.command`` in ``workspace``, torn down normally.

    ``probe``: ``None`` skips it (the handshake alone decides), unless ``login_probe`` is given:
    then the probe (these settings' version bound, login lookup and slot prefix) runs inside the
    handshake's own login, for ``agent_program`` (default: the command's first word). Never
    raises for anything the host does; whatever happens ends in a verdict.

    :raises ValueError: ``probe is None`` and ``handshake`` off: nothing would be checked.
    """
    check, _ = await _check_host(
        host,
        options,
        workspace,
        settings=settings,
        handshake=handshake,
        probe=probe,
        login_probe=login_probe,
        agent_program=agent_program,
    )
    return check


async def _check_host(
    host: Host,
    options: SessionOptions,
    workspace: str,
    *,
    settings: SshSettings,
    handshake: bool,
    probe: HostProbe | None,
    login_probe: ProbeSettings | None,
    agent_program: str,
) -> tuple[HostCheck, HostProbe | None]:
    """:func:`check_host`, and the probe run in the login when there was one (for the cache)."""
    report = probe.report if probe is not None else None
    base = HostCheck(host, Verdict.READY, "", latency_s=probe.latency_s if probe else 0.0, report=report)
    if probe is not None and (probe.verdict is not Verdict.READY or not handshake):
        return replace(base, verdict=probe.verdict, message=probe.message, fix=probe.fix, cause=probe.cause), None
    if not handshake:
        raise ValueError("a check needs a probe, a handshake, or both")
    from ..session.verification import verify_credentials  # here: see host_target

    started = time.monotonic()
    preflight: LoginProbe | None = None
    try:
        if probe is None and login_probe is not None:
            preflight = _login_probe(host, options, workspace, login_probe, agent_program)
        target = host_target(host, settings, preflight=preflight)
        credentials = await verify_credentials(workspace, options, target)
    except ValueError as exc:  # the inventory's ssh options: ssh was never run
        return replace(
            base,
            verdict=Verdict.UNREACHABLE,
            message=str(exc),
            fix=fix_for(Cause.SSH_CONFIG_INVALID),
            cause=Cause.SSH_CONFIG_INVALID,
        ), None
    except RemoteAcpError as exc:
        found = preflight.result if preflight is not None else None
        kind: str | None = None
        if found is not None and not found.ready:  # the probe refused the go-ahead: nothing started
            judged = found.judgement
        else:
            judged = handshake_judgement(exc)
            kind = exc.kind.value
            if preflight is not None and found is None and judged.verdict is Verdict.HANDSHAKE_TIMEOUT:
                # Logged in (or hung in the login) and never got the probe's report out: the
                # agent was never started, so this is not the handshake's time.
                judged = Judgement(
                    Verdict.PROBE_FAILED,
                    f"the probe did not finish: {exc}",
                    fix_for(Cause.PROBE_INCOMPLETE),
                    Cause.PROBE_INCOMPLETE,
                )
        return (
            replace(
                base,
                verdict=judged.verdict,
                message=judged.message,
                fix=judged.fix,
                latency_s=base.latency_s + time.monotonic() - started,
                report=found.report if found is not None else base.report,
                error_kind=kind,
                cause=judged.why,
                # initialize answered before the failure (a credential refused at session/new):
                # the agent's name and version are known, and shown.
                handshake=HandshakeFacts(exc.facts.agent_name, exc.facts.agent_version or "")
                if exc.facts.agent_name is not None
                else None,
            ),
            found,
        )
    found = preflight.result if preflight is not None else None
    facts = HandshakeFacts(credentials.agent_name, credentials.agent_version, _auth_required(credentials))
    return (
        replace(
            base,
            message=_ready_message(facts, probe if probe is not None else found),
            latency_s=base.latency_s + time.monotonic() - started,
            report=found.report if found is not None else base.report,
            handshake=facts,
        ),
        found,
    )


def _login_probe(
    host: Host, options: SessionOptions, workspace: str, settings: ProbeSettings, agent_program: str
) -> LoginProbe:
    """The probe of ``host`` as its handshake's preflight.

    :raises ValueError: an agent program or workspace the probe cannot carry (as ``probe_host``).
    """
    from ..targets.launch import command_argv  # here: see host_target

    program = agent_program or command_argv(options.command)[0]
    return LoginProbe(
        host,
        program,
        workspace,
        version_timeout_s=max(1, math.ceil(settings.version_timeout_s)),
        login_lookup=settings.login_lookup,
        slot_prefix=settings.slot_prefix,
    )


def _ready_message(facts: HandshakeFacts, probe: HostProbe | None) -> str:
    name = facts.agent_name or "the agent"
    said = f"{name} {facts.agent_version}".strip() if facts.agent_version else name
    parts = [f"{said} answered initialize and opened a session"]
    if facts.auth_required is not None:
        # Some agents (Claude's ACP adapter) list none and refuse only the first prompt: say so,
        # so "no auth methods" does not read as "no login needed".
        parts.append(
            "it lists auth methods"
            if facts.auth_required
            else "it lists no auth methods (an agent may still refuse its credential at the first prompt)"
        )
    if probe is not None and probe.message and probe.message != "ready":
        parts.append(probe.message)
    return "; ".join(parts)


async def check_hosts(
    hosts: Sequence[Host],
    options: SessionOptions,
    workspace: str,
    *,
    settings: SshSettings,
    probe: Callable[[list[Host]], Awaitable[Sequence[HostProbe]]] | None,
    handshake: bool = True,
    login_probe: ProbeSettings | None = None,
    concurrency: int = 32,
    cache: ProbeCache | None = None,
    max_age_s: float = 0.0,
    agent_program: str = "",
    on_done: Callable[[HostCheck], None] | None = None,
) -> list[HostCheck]:
    """Check ``hosts``, at most ``concurrency`` at once: each host is probed (``probe``, unless
    ``cache`` holds a result fresh enough, which it keeps), then, once its own probe found it
    ready, handshaken (per host at most ``settings.max_concurrent_starts`` starting). A host's
    handshake does not wait for the other hosts' probes. The result is in the order of
    ``hosts``; ``on_done`` sees each host as its verdict is known.

    ``login_probe``: with the handshake, a host with no fresh cached probe is probed inside its
    handshake's login (see :func:`check_host`), not through ``probe``: one login per host. Its
    probe goes to the cache as ``probe``'s would.
    """
    done: dict[str, HostCheck] = {}
    limiter = anyio.CapacityLimiter(max(1, concurrency))
    per_address: dict[tuple[str, int | None], anyio.Semaphore] = {}

    async def probed(host: Host) -> tuple[HostProbe | None, float | None]:
        if probe is None:
            return None, None
        # Probes of one address (two inventory names for one host) stay below sshd's MaxStartups.
        same = per_address.setdefault((host.address or host.name, host.port), anyio.Semaphore(PER_ADDRESS))
        async with same:
            (result,) = await probe([host])
        if cache is not None:
            with contextlib.suppress(OSError):  # a cache that cannot be written only costs the reuse
                cache.put(result, agent_program, workspace)
        return result, None

    def cached(host: Host) -> CachedProbe | None:
        return cache.get(host, agent_program, workspace, max_age_s=max_age_s) if cache is not None else None

    async def one(host: Host) -> None:
        async with limiter:
            hit = cached(host)
            if hit is None and handshake and login_probe is not None:
                check, found = await _check_host(
                    host,
                    options,
                    workspace,
                    settings=settings,
                    handshake=True,
                    probe=None,
                    login_probe=login_probe,
                    agent_program=agent_program,
                )
                if found is not None and cache is not None:
                    with contextlib.suppress(OSError):
                        cache.put(found, agent_program, workspace)
                age = None
            else:
                result, age = (hit.probe, hit.age_s) if hit is not None else await probed(host)
                check = await check_host(host, options, workspace, settings=settings, handshake=handshake, probe=result)
        done[host.name] = replace(check, probe_age_s=age)
        if on_done is not None:
            on_done(done[host.name])

    async with anyio.create_task_group() as tg:
        for host in hosts:
            tg.start_soon(one, host)
    return [done[h.name] for h in hosts]

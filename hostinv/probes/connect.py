"""Connecting a probe: asyncssh given what ``ssh -G`` resolved, the host-key decision, and the
verdict for a connection that failed before login.

asyncssh gets every option explicitly and no config file (:mod:`hostinv.sshopts` says why). It
logs in with keys only (the files ssh would offer and, unless ``IdentitiesOnly``, the ssh-agent;
encrypted keys it cannot open are skipped, never asked about), forwards no agent, and runs a
``ProxyCommand`` as ssh runs it (its tokens expanded, by the user's shell). Host keys follow the
policy ssh's configuration sets for the host, tightened by the caller's, never loosened
(:mod:`.host_keys`): asyncssh trusts the keys the known_hosts files hold for the host, but for
those ``RevokedHostKeys`` lists, and a key they do not hold (or a revoked one) is decided by
:class:`~.host_keys.HostKeyCheck`.
"""

from __future__ import annotations

import base64
import errno
import getpass
import os
import socket
from typing import TYPE_CHECKING, Any

from ..causes import Cause, fix_for, ssh_words
from ..sshopts import ResolvedSsh, existing, expand_proxy_command, expand_revoked_path, login_home, probe_ciphers
from .host_keys import (
    HostKeyCheck,
    Policy,
    RevokedKeys,
    effective_policy,
    merge_revoked,
    parsed_known_hosts,
    read_revoked_keys,
)
from .verdicts import Judgement, Verdict

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["asyncssh_module", "connect", "judge_connect_error", "key_check", "mask"]


def mask(text: str, limit: int = 300) -> str:
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
    proxy_command: str | None = None,
) -> Judgement:
    """The verdict for an exception raised before login (resolving, connecting, host key,
    authentication). Pure: ``exc`` is asyncssh's, an ``OSError`` or a timeout. ``via``: the jump
    host the connection went through, if any; ``proxy_command``: the ProxyCommand it went through
    (without a jump host), if any."""
    at = f"{address}:{port}" + (f" (through the jump host {via})" if via else "")
    if proxy_command and not via:
        at += f" (through the ProxyCommand {mask(proxy_command, 120)!r})"
    name = type(exc).__name__
    if key_check is not None and key_check.outcome == "revoked":
        return Judgement(
            Verdict.HOST_KEY_CHANGED,
            f"{destination} ({key_check.resolved.known_hosts_name}) offered a host key that ssh's RevokedHostKeys "
            f"file {key_check.found_in} lists: revoked, refused as ssh refuses it",
            fix_for(
                Cause.HOST_KEY_CHANGED,
                known_hosts=key_check.write_file or (key_check.read_files[0] if key_check.read_files else None),
                key_name=key_check.resolved.known_hosts_name,
            ),
            Cause.HOST_KEY_CHANGED,
        )
    if key_check is not None and key_check.outcome == "unverifiable" and key_check.revoked is not None:
        cause = key_check.revoked.cause
        fix = (
            fix_for(cause, ssh_target=ssh_words(_bare(destination), port if port != 22 else None))
            if cause is Cause.HOST_KEY_UNKNOWN
            else f"{fix_for(cause)}; RevokedHostKeys must name a readable file of public keys (or a KRL)"
        )
        return Judgement(
            Verdict.HOST_KEY_UNKNOWN if cause is Cause.HOST_KEY_UNKNOWN else Verdict.UNREACHABLE,
            f"{destination} ({key_check.resolved.known_hosts_name}): {key_check.revoked.problem}; no host key "
            "can be checked against it, so none is trusted: refused, nothing written",
            fix,
            cause,
        )
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
            f"and {key_check.refusal or key_check.because or 'the host key policy refuses a new key'}: refused, "
            "nothing written",
            fix_for(
                Cause.HOST_KEY_UNKNOWN,
                ssh_target=ssh_words(_bare(destination), port if port != 22 else None),
                known_hosts=key_check.write_file,
            ),
            Cause.HOST_KEY_UNKNOWN,
        )
    if name == "HostKeyNotVerifiable":
        if "revoked" in str(exc):
            listed = key_check.revoked.path if key_check is not None and key_check.revoked is not None else None
            return Judgement(
                Verdict.HOST_KEY_CHANGED,
                f"{destination} offered a revoked host key: {exc}"
                + (f" (a @revoked line, or ssh's RevokedHostKeys file {listed})" if listed else ""),
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


def asyncssh_module() -> Any:
    """asyncssh, imported on the first probe: most of a probe's start-up, never paid by importing
    :mod:`hostinv` (this package's modules import it through here only)."""
    import asyncssh

    return asyncssh


_CLIENT_CLASS: Any = None


def _client_factory(check: HostKeyCheck) -> Callable[[], Any]:
    global _CLIENT_CLASS
    asyncssh = asyncssh_module()
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

                return check.decide(addr, key.algorithm.decode(), base64.b64encode(key.public_data).decode(), holds_key)

            def validate_host_ca_key(self, host: str, addr: str, port: int, key: Any) -> bool:
                # A CA no known_hosts file trusts (or a revoked one, which the connection does not
                # trust itself): refused, recording why when RevokedHostKeys lists it.
                self._check.refuses(base64.b64encode(key.public_data).decode())
                return False

        _CLIENT_CLASS = _Client
    client_class = _CLIENT_CLASS
    return lambda: client_class(check)


def key_check(resolved: ResolvedSsh, *, requested: Policy, known_hosts: str | None) -> HostKeyCheck:
    """The host-key decision for one connection: the files ssh reads (``known_hosts``, when
    given, in place of ``UserKnownHostsFile``), the policy :func:`effective_policy` gives and the
    keys ``RevokedHostKeys`` lists (read here, when set)."""
    user_files = (os.path.expanduser(known_hosts),) if known_hosts else resolved.user_known_hosts
    policy, because = effective_policy(resolved.host_key_policy, requested)
    return HostKeyCheck(
        resolved=resolved,
        policy=policy,
        read_files=tuple(existing([*user_files, *resolved.global_known_hosts])),
        write_file=user_files[0] if user_files else None,
        because=because,
        revoked=_revoked_keys(resolved),
    )


_REVOKED: dict[tuple[str, int, int, int], RevokedKeys] = {}
_REVOKED_KEPT = 8


def _revoked_keys(resolved: ResolvedSsh) -> RevokedKeys | None:
    """The keys ``RevokedHostKeys`` lists for ``resolved`` (``None``: it is not set), each file
    read once while it is unchanged. The value is read as written (OpenSSH 9.2 opens it so) and,
    where that differs, expanded as later versions expand it (:func:`merge_revoked`)."""
    raw = resolved.revoked_host_keys
    if raw is None:
        return None
    paths = [raw]
    try:
        expanded = expand_revoked_path(
            raw,
            resolved,
            home=login_home(),
            local_user=_local_user(),
            uid=os.getuid(),
            local_host=socket.gethostname(),
            environ=os.environ,
        )
    except ValueError:
        expanded = raw  # no later ssh would open it either; the value as written is read
    if expanded != raw:
        paths.append(expanded)
    return merge_revoked([_read_revoked(path) for path in paths])


def _read_revoked(path: str) -> RevokedKeys:
    try:
        info = os.stat(path)
    except OSError:
        return read_revoked_keys(path, _plain_blob)  # says why it cannot be read
    version = (path, info.st_ino, info.st_size, info.st_mtime_ns)
    kept = _REVOKED.get(version)
    if kept is None:
        if len(_REVOKED) >= _REVOKED_KEPT:
            _REVOKED.clear()
        kept = _REVOKED[version] = read_revoked_keys(path, _plain_blob)
    return kept


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _plain_blob(line: str) -> bytes:
    """The public blob of the key (or the certified key) a ``RevokedHostKeys`` line holds.

    :raises ValueError: for a line that holds no key, as ssh refuses it.
    """
    asyncssh = asyncssh_module()
    try:
        return bytes(asyncssh.import_public_key(line).public_data)
    except ValueError:  # asyncssh's KeyImportError: perhaps a certificate
        return bytes(asyncssh.import_certificate(line).key.public_data)


def _public_key(blob: bytes) -> Any:
    """asyncssh's key for a public blob (``string`` algorithm, then the key's fields)."""
    size = int.from_bytes(blob[:4], "big")
    algorithm = blob[4 : 4 + size].decode("ascii", "replace")
    return asyncssh_module().import_public_key(f"{algorithm} {base64.b64encode(blob).decode()}")


def _known_hosts(check: HostKeyCheck) -> Any:
    """What asyncssh is given as ``known_hosts``: the files' keys (parsed once per version), less
    those ``RevokedHostKeys`` lists (all of them when the file cannot be checked), so that a
    revoked key reaches the decision (:meth:`HostKeyCheck.decide`) as an untrusted one."""
    asyncssh = asyncssh_module()
    # No file: an empty set, since asyncssh reads ~/.ssh/known_hosts for an empty list.
    files = (
        parsed_known_hosts(check.read_files, asyncssh.read_known_hosts)
        if check.read_files
        else asyncssh.import_known_hosts("")
    )
    revoked = check.revoked
    if revoked is None:
        return files

    def matching(host: str, addr: str, port: int | None) -> Any:
        trusted, authorities, refused, *x509 = asyncssh.match_known_hosts(files, host, addr, port)
        if revoked.problem:
            return ([], [], refused, *x509)

        def kept(keys: Any) -> list[Any]:
            return [k for k in keys if bytes(k.public_data) not in revoked.blobs]

        trusted, authorities = kept(trusted), kept(authorities)
        if authorities and revoked.blobs:
            # A certificate signed by a trusted CA is not asked about: asyncssh refuses one whose
            # key is listed only from its own list (and says "revoked").
            refused = [*refused, *(_public_key(blob) for blob in revoked.blobs)]
        return (trusted, authorities, refused, *x509)

    return matching


async def connect(
    resolved: ResolvedSsh, check: HostKeyCheck, *, timeout_s: float, tunnel: Any = None, original: str = ""
) -> Any:
    """An asyncssh connection to ``resolved`` (through ``tunnel``, a connection to the last jump
    host, or else its ``ProxyCommand``), logged in. ``original``: the name as given, ``%n`` in a
    ProxyCommand.

    :raises OSError, asyncssh.Error: as asyncssh raises them (see :func:`judge_connect_error`).
    :raises ValueError: a ProxyCommand ssh would refuse (an unknown ``%`` token).
    """
    asyncssh = asyncssh_module()
    keys = existing(resolved.identity_files)
    proxy: Any = ()
    if tunnel is None and resolved.proxy_command:
        proxy = expand_proxy_command(
            resolved.proxy_command,
            hostname=resolved.hostname,
            port=resolved.port,
            user=resolved.user,
            original=original or resolved.hostname,
        )
    return await asyncssh.connect(
        resolved.hostname,
        resolved.port,
        tunnel=tunnel if tunnel is not None else (),
        proxy_command=proxy,
        username=resolved.user,
        config=None,  # resolved by ssh -G already; asyncssh would read ~/.ssh/config again
        client_factory=_client_factory(check),
        known_hosts=_known_hosts(check),
        host_key_alias=resolved.host_key_alias,
        client_keys=keys,
        ignore_encrypted=True,
        agent_path=None if resolved.identities_only else (),
        agent_forwarding=False,
        password=None,
        password_auth=False,
        kbdint_auth=False,
        gss_host=None,
        connect_timeout=timeout_s,
        login_timeout=timeout_s,
        keepalive_interval=0,
        encryption_algs=probe_ciphers(resolved.ciphers, _supported_ciphers()) or (),
    )


def _supported_ciphers() -> list[str]:
    from asyncssh.encryption import get_encryption_algs  # here, as asyncssh itself (asyncssh_module)

    return [alg.decode() for alg in get_encryption_algs()]

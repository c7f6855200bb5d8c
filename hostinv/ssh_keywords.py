"""ssh_config syntax: the keywords an OpenSSH client config takes, to catch a misspelt one where
it is written, and a word written so that ssh_config reads it back exactly (:func:`config_word`).

A typo in an inventory's ``ssh_options`` (``ProxyJum``) would otherwise load fine and fail only
when ``ssh`` reads the config generated from it, pointing at a cache file. A keyword this list
does not know is refused only when it is a near miss of one it knows: an unknown keyword with no
near miss may be a newer OpenSSH's, and ``ssh`` itself says whether it knows it.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["KEYWORDS", "config_word", "misspelt"]

KEYWORDS: Final = (
    "AddKeysToAgent AddressFamily BatchMode BindAddress BindInterface CanonicalDomains "
    "CanonicalizeFallbackLocal CanonicalizeHostname CanonicalizeMaxDots CanonicalizePermittedCNAMEs "
    "CASignatureAlgorithms CertificateFile ChannelTimeout CheckHostIP Ciphers ClearAllForwardings "
    "Compression ConnectionAttempts ConnectTimeout ControlMaster ControlPath ControlPersist "
    "DynamicForward EnableEscapeCommandline EnableSSHKeysign EscapeChar ExitOnForwardFailure "
    "FingerprintHash ForkAfterAuthentication ForwardAgent ForwardX11 ForwardX11Timeout ForwardX11Trusted "
    "GatewayPorts GlobalKnownHostsFile GSSAPIAuthentication GSSAPIDelegateCredentials GSSAPIKexAlgorithms "
    "GSSAPIKeyExchange GSSAPIRenewalForcesRekey GSSAPITrustDns HashKnownHosts HostbasedAcceptedAlgorithms "
    "HostbasedAuthentication HostKeyAlgorithms HostKeyAlias HostName IdentitiesOnly IdentityAgent "
    "IdentityFile IgnoreUnknown IPQoS KbdInteractiveAuthentication KbdInteractiveDevices KexAlgorithms "
    "KnownHostsCommand LocalCommand LocalForward LogLevel LogVerbose MACs NoHostAuthenticationForLocalhost "
    "NumberOfPasswordPrompts ObscureKeystrokeTiming PasswordAuthentication PermitLocalCommand "
    "PermitRemoteOpen PKCS11Provider Port PreferredAuthentications ProxyCommand ProxyJump ProxyUseFdpass "
    "PubkeyAcceptedAlgorithms PubkeyAcceptedKeyTypes PubkeyAuthentication RekeyLimit RemoteCommand "
    "RemoteForward RequestTTY RequiredRSASize RevokedHostKeys SecurityKeyProvider SendEnv "
    "ServerAliveCountMax ServerAliveInterval SessionType SetEnv SmartcardDevice StdinNull "
    "StreamLocalBindMask StreamLocalBindUnlink StrictHostKeyChecking SyslogFacility Tag TCPKeepAlive "
    "Tunnel TunnelDevice UpdateHostKeys User UserKnownHostsFile VerifyHostKeyDNS VisualHostKey "
    "XAuthLocation"
).split()
"""OpenSSH 9.x client keywords (ssh_config(5)), as the manual spells them."""

_BY_LOWER: Final = {keyword.lower(): keyword for keyword in KEYWORDS}


def misspelt(keyword: str) -> str | None:
    """The keyword ``keyword`` was probably meant to be, when it is a near miss of a known one
    (OpenSSH matches keywords without regard to case, so case alone is no miss); else ``None``."""
    if keyword.lower() in _BY_LOWER:
        return None
    import difflib  # here: only a keyword nobody knows pays for it

    near = difflib.get_close_matches(keyword.lower(), _BY_LOWER, n=1, cutoff=0.85)
    return _BY_LOWER[near[0]] if near else None


def config_word(path: str) -> str:
    """``path`` as one ssh_config word that reads back exactly, for ``Include`` or ``Host``.

    Two layers: ``Include`` expands globs (so ``\\ * ? [`` are escaped for glob), and the
    ssh_config line parser unquotes and unescapes (so ``\\ " '`` are escaped for it, inside
    double quotes).

    :raises ValueError: a line break or NUL, which no ssh_config word can hold.
    """
    if any(c in path for c in "\r\n\0"):
        raise ValueError("an ssh_config path cannot contain line breaks")
    globbed = re.sub(r"([\\*?\[])", r"\\\1", path)
    return '"' + re.sub(r"([\\\"'])", r"\\\1", globbed) + '"'

"""Checking that a runtime accepts its credential, before any working turn.

Runtimes refuse a credential at different calls: Gemini CLI and Qwen Code at ``session/new``,
Claude's ACP adapter only at ``session/prompt`` (and it lists no auth methods). Verification
stops before any prompt (a prompt costs a model call), so an accepted ``session/new`` proves the
credential only for an agent that asks for one: :attr:`CredentialVerdict.conclusive` says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .core import open_verification_session

if TYPE_CHECKING:
    from ..options import SessionOptions
    from ..targets.launch import LaunchTarget

__all__ = ["CredentialVerdict", "verify_credentials"]


@dataclass(frozen=True, slots=True)
class CredentialVerdict:
    """A runtime that accepted its credential: what it said about itself."""

    agent_name: str
    agent_version: str
    session_id: str
    auth_methods: tuple[str, ...] = ()
    """The ids of the authentication methods the agent lists (empty: it names none)."""

    @property
    def conclusive(self) -> bool:
        """Whether the accepted ``session/new`` shows the credential is accepted: only when the
        agent lists auth methods. One that lists none may need no login, or may refuse its
        credential at the first prompt (``-32000`` there ends the turn ``credential_unverified``)."""
        return bool(self.auth_methods)


async def verify_credentials(
    workspace: str, options: SessionOptions, target: LaunchTarget | None = None
) -> CredentialVerdict:
    """Check that the runtime accepts its credential: ``initialize`` and ``session/new``, then
    teardown, which deletes the verification session when the agent advertises
    ``session/delete`` (else closes it when it advertises ``session/close``).

    :raises RemoteAcpError: ``credential_unverified`` quoting the runtime when either call
        answers ``-32000``; ``port_exit`` with the early exit report when the runtime exits
        before answering; and the other start-up kinds.
    """
    async with open_verification_session(workspace, options, target) as session:
        info = session.info
        return CredentialVerdict(info.agent_name, info.agent_version, info.session_id, info.auth_methods)

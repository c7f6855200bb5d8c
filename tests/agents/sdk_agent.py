"""A scripted ACP agent built on the official Python SDK (agent-client-protocol 0.12.1).

Run as ``python tests/agents/sdk_agent.py [--advertise load,resume,close]``. It speaks ACP on
stdio and logs to stderr only. Whole words in the prompt text (case-insensitive) script the turn:

- ``think``: an agent_thought_chunk;  ``plan``: a plan update with two entries;
- ``tool``: tool_call ``t1`` (read, pending) then tool_call_update ``t1`` completed;
- ``permission``: session/request_permission (``allow``/``reject``), then a message chunk
  ``permission: <optionId or cancelled>``;
- ``slow``: waits up to 30 s, ending early with stopReason ``cancelled`` on session/cancel;
- ``refuse``: stopReason ``refusal`` (the prompt is then left out of the transcript);
- none of these: ``echo: <text>`` as three agent_message_chunk updates sharing one messageId.

Methods the agent does not implement (and load/resume/close unless advertised) answer -32601.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
import sys
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import acp
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AllowedOutcome,
    CloseSessionResponse,
    Implementation,
    LoadSessionResponse,
    PermissionOption,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionResumeCapabilities,
    TextContentBlock,
    ToolCallUpdate,
)

if TYPE_CHECKING:
    from acp.helpers import ContentBlock

log = logging.getLogger("sdk-agent")

Role = Literal["user", "agent"]
FEATURES = ("load", "resume", "close")


@dataclass
class Session:
    """One session's transcript and the cancel signal of its running turn."""

    transcript: list[tuple[Role, str]] = field(default_factory=list)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)


class SdkAgent:
    """The agent side; ``acp.run_agent`` routes each ACP method to the method of the same name."""

    conn: acp.Client

    def __init__(self, advertise: frozenset[str]) -> None:
        self._advertise = advertise
        self._sessions: dict[str, Session] = {}

    def on_connect(self, conn: acp.Client) -> None:
        self.conn = conn  # the AgentSideConnection, called back before any message is read

    def _require(self, feature: str, method: str) -> None:
        if feature not in self._advertise:
            raise acp.RequestError.method_not_found(method)

    def _session(self, session_id: str) -> Session:
        if session_id not in self._sessions:
            raise acp.RequestError.invalid_params({"sessionId": session_id, "reason": "unknown session"})
        return self._sessions[session_id]

    async def initialize(self, protocol_version: int, **kwargs: Any) -> acp.InitializeResponse:
        log.info("initialize: client protocolVersion %s", protocol_version)
        session_caps = SessionCapabilities(
            resume=SessionResumeCapabilities() if "resume" in self._advertise else None,
            close=SessionCloseCapabilities() if "close" in self._advertise else None,
        )
        caps = AgentCapabilities(load_session="load" in self._advertise, session_capabilities=session_caps)
        return acp.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=caps,
            agent_info=Implementation(name="sdk-agent", version="0.12.1"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> acp.NewSessionResponse:
        session_id = uuid.uuid4().hex
        self._sessions[session_id] = Session()
        log.info("session/new %s (cwd %s)", session_id, cwd)
        return acp.NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        self._require("load", "session/load")
        for role, text in self._session(session_id).transcript:
            if role == "user":
                await self.conn.session_update(session_id, acp.update_user_message_text(text))
            else:
                await self.conn.session_update(session_id, acp.update_agent_message_text(text))
        return LoadSessionResponse()

    async def resume_session(self, session_id: str, cwd: str, **kwargs: Any) -> ResumeSessionResponse:
        self._require("resume", "session/resume")
        self._session(session_id)
        return ResumeSessionResponse()

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        self._require("close", "session/close")
        self._session(session_id).cancelled.set()
        del self._sessions[session_id]
        return CloseSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        log.info("session/cancel %s", session_id)
        if session := self._sessions.get(session_id):
            session.cancelled.set()

    async def prompt(self, session_id: str, prompt: list[ContentBlock], **kwargs: Any) -> acp.PromptResponse:
        session = self._session(session_id)
        session.cancelled = asyncio.Event()
        text = "".join(block.text for block in prompt if isinstance(block, TextContentBlock))
        words = set(re.findall(r"[a-z]+", text.lower()))
        log.info("session/prompt %s: %r", session_id, text)
        replies: list[str] = []
        if "think" in words:
            await self.conn.session_update(session_id, acp.update_agent_thought_text("Thinking it over."))
        if "plan" in words:
            entries = [
                acp.plan_entry("Read notes.txt", priority="high", status="in_progress"),
                acp.plan_entry("Summarise the notes", priority="medium", status="pending"),
            ]
            await self.conn.session_update(session_id, acp.update_plan(entries))
        if "tool" in words:
            start = acp.start_tool_call("t1", "Read file", kind="read", status="pending")
            await self.conn.session_update(session_id, start)
            done = acp.update_tool_call("t1", title="Read notes.txt", status="completed")
            await self.conn.session_update(session_id, done)
        if "permission" in words:
            replies.append(f"permission: {await self._ask_permission(session_id)}")
            await self._say(session_id, replies[-1])
        if "slow" in words:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(session.cancelled.wait(), timeout=30)
        if not session.cancelled.is_set() and "refuse" in words:
            return acp.PromptResponse(stop_reason="refusal")
        if not words & {"think", "plan", "tool", "permission", "slow", "refuse"}:
            replies.append(f"echo: {text}")
            await self._say(session_id, replies[-1], chunks=3)
        session.transcript.append(("user", text))
        session.transcript.extend(("agent", reply) for reply in replies)
        return acp.PromptResponse(stop_reason="cancelled" if session.cancelled.is_set() else "end_turn")

    async def _ask_permission(self, session_id: str) -> str:
        tool_call = ToolCallUpdate(tool_call_id="p1", title="Write notes.txt", kind="edit", status="pending")
        options = [
            PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
            PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ]
        response = await self.conn.request_permission(session_id, tool_call, options)
        outcome = response.outcome
        return outcome.option_id if isinstance(outcome, AllowedOutcome) else "cancelled"

    async def _say(self, session_id: str, text: str, chunks: int = 1) -> None:
        """Stream ``text`` as ``chunks`` agent_message_chunk updates sharing one messageId."""
        message_id = uuid.uuid4().hex
        cuts = [len(text) * i // chunks for i in range(chunks + 1)]
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            update = AgentMessageChunk(
                session_update="agent_message_chunk",
                content=acp.text_block(text[lo:hi]),
                message_id=message_id,
            )
            await self.conn.session_update(session_id, update)


def parse_advertise(value: str) -> frozenset[str]:
    features = frozenset(part.strip() for part in value.split(",") if part.strip())
    if unknown := features - set(FEATURES):
        raise argparse.ArgumentTypeError(f"unknown feature(s) {sorted(unknown)}; choose from {FEATURES}")
    return features


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--advertise", type=parse_advertise, default=frozenset(), help="comma list from load,resume,close"
    )
    parser.add_argument("--log-level", default="INFO", help="stderr logging level (default INFO)")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="sdk-agent %(levelname)s %(message)s")
    # Not a subclass of the acp.Agent Protocol: its stub methods would answer `null` to methods we do
    # not implement, whereas the SDK's router answers -32601 for methods an agent object lacks.
    # session/resume and session/close are routed only with use_unstable_protocol=True in 0.12.1.
    agent = cast(acp.Agent, SdkAgent(args.advertise))
    asyncio.run(acp.run_agent(agent, use_unstable_protocol=True))


if __name__ == "__main__":
    main()

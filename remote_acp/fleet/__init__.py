"""The fleet: checking hosts of the inventory for an agent, one verdict per host.

``hostinv`` reads the inventory and probes hosts (nothing of ACP); this package adds what only a
session can tell (:func:`check_host`: a real handshake through the SSH target) and combines both
into one :class:`HostCheck` per host. The session core never imports it.
"""

from __future__ import annotations

from .check import check_host, handshake_judgement, host_config_text, host_target
from .report import (
    EXIT_SOME_NOT_READY,
    EXIT_SOME_UNREACHABLE,
    HandshakeFacts,
    HostCheck,
    ProbeResult,
    exit_status,
    table_rows,
)

__all__ = [
    "EXIT_SOME_NOT_READY",
    "EXIT_SOME_UNREACHABLE",
    "HandshakeFacts",
    "HostCheck",
    "ProbeResult",
    "check_host",
    "exit_status",
    "handshake_judgement",
    "host_config_text",
    "host_target",
    "table_rows",
]

"""The fleet: checking hosts of the inventory for an agent, one verdict per host.

``hostinv`` reads the inventory and probes hosts (nothing of ACP); this package adds what only a
session can tell (:func:`check_host`: a real handshake through the SSH target) and combines both
into one :class:`HostCheck` per host; :class:`HostPool` places sessions on the ready hosts of a
selection, within each host's capacity. The session core never imports it.
"""

from __future__ import annotations

from .check import check_host, check_hosts, handshake_judgement, host_config_text, host_target
from .pool import Attempt, HostPool, Placement, rank_hosts
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
    "Attempt",
    "HostPool",
    "Placement",
    "EXIT_SOME_UNREACHABLE",
    "HandshakeFacts",
    "HostCheck",
    "ProbeResult",
    "check_host",
    "check_hosts",
    "exit_status",
    "handshake_judgement",
    "host_config_text",
    "host_target",
    "rank_hosts",
    "table_rows",
]

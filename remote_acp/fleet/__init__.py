"""The fleet: checking hosts of the inventory for an agent, one verdict per host.

``hostinv`` reads the inventory and probes hosts (nothing of ACP); this package adds what only a
session can tell (:func:`check_host`: a real handshake through the SSH target) and combines both
into one :class:`HostCheck` per host; :class:`HostPool` places sessions on the ready hosts of a
selection, within each host's capacity. The session core never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hostinv.lazy import lazy_exports

from .check import check_host, check_hosts, handshake_judgement, host_config_text, host_target
from .report import (
    EXIT_SOME_NOT_READY,
    EXIT_SOME_UNREACHABLE,
    HandshakeFacts,
    HostCheck,
    detail_lines,
    exit_status,
    table_rows,
)

if TYPE_CHECKING:
    from .pool import Attempt, HostPool, Placement, SlotWait, rank_hosts

__all__ = [
    "EXIT_SOME_NOT_READY",
    "Attempt",
    "HostPool",
    "Placement",
    "SlotWait",
    "EXIT_SOME_UNREACHABLE",
    "HandshakeFacts",
    "HostCheck",
    "check_host",
    "check_hosts",
    "exit_status",
    "handshake_judgement",
    "host_config_text",
    "host_target",
    "rank_hosts",
    "detail_lines",
    "table_rows",
]

# The pool imports the session core: only placement needs it, not a check.
_HOME = dict.fromkeys(("Attempt", "HostPool", "Placement", "SlotWait", "rank_hosts"), "pool")

if not TYPE_CHECKING:  # a misspelt name fails type checking instead of resolving to Any
    __getattr__, __dir__ = lazy_exports(__name__, _HOME, globals())

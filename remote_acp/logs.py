"""Structured logging: every record of a session carries its session id, pid, host and component."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import MutableMapping

__all__ = ["ContextLogger"]


class ContextLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger adapter whose context fields merge with (not replace) a call's own ``extra``."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs

    def bind(self, **fields: Any) -> None:
        """Add or change context fields (the session id becomes known after start)."""
        assert isinstance(self.extra, dict)
        self.extra.update(fields)

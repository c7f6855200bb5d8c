"""Structured logging: every record of a session carries its session id, pid, host and component.

Every ``remote_acp`` logger carries :class:`~remote_acp.masking.MaskingFilter`, so the secrets of
live sessions are masked in whatever reaches the embedding application's handlers; the library
never touches the application's root logger or handlers. The package's logger has a
:class:`logging.NullHandler`, so an application that configured no logging gets no output from
the library (without a handler anywhere, :data:`logging.lastResort` would print every warning to
stderr); records still propagate to whatever handlers the application sets up.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .masking import install_filter

if TYPE_CHECKING:
    from collections.abc import MutableMapping

__all__ = ["ContextLogger", "get_logger"]

# Every library logger is made through this module, so it is imported before any record is logged.
logging.getLogger("remote_acp").addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with the masking filter attached (a filter on the package's
    logger does not apply to its children's records, so each logger carries its own)."""
    return install_filter(logging.getLogger(name))


class ContextLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger adapter whose context fields merge with (not replace) a call's own ``extra``."""

    def __init__(self, logger: logging.Logger, extra: MutableMapping[str, Any] | None = None) -> None:
        super().__init__(install_filter(logger), extra)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs

    def bind(self, **fields: Any) -> None:
        """Add or change context fields (the session id becomes known after start)."""
        assert isinstance(self.extra, dict)
        self.extra.update(fields)

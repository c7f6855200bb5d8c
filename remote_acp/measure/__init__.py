"""Token accounting outside the protocol: measurement sources that read a runtime's own records.

See :mod:`remote_acp.measure.session` for how a session uses them, and docs/library.md's "Token
accounting" for the behaviour.
"""

from .session import MAX_STARTS, SOURCES, Measurement
from .source import Armed, Source

__all__ = ["MAX_STARTS", "SOURCES", "Armed", "Measurement", "Source"]

"""Logging for the CLI: human text or one JSON object per line, on stderr.

Log lines quote what agents send, so both formats keep one record on one line whatever the text
holds: JSON escapes it (ASCII only), the text format writes control characters as escapes
(:func:`~remote_acp.masking.escape_control`), so an agent can neither forge a log line nor send
the terminal an escape sequence. The handler masks the secrets of live sessions in every record,
whatever logger it came from.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any

from ..masking import MaskingFilter, escape_control
from .streams import standard_output

__all__ = ["JsonFormatter", "TextFormatter", "configure_logging", "log_to_command_stderr"]

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "taskName"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(_extras(record))
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        # ASCII: a lone surrogate in an agent's text must not break the log line (or the run).
        return json.dumps(out, default=str, ensure_ascii=True)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={escape_control(str(v))}" for k, v in _extras(record).items())
        line = f"{record.levelname.lower()}: {escape_control(record.getMessage())}"
        line = f"{line} ({fields})" if fields else line
        if record.exc_info:
            # A traceback spans lines by nature; what it quotes still cannot drive the terminal.
            line += "\n" + escape_control(self.formatException(record.exc_info), keep_newlines=True)
        return line


def configure_logging(level: str, fmt: str, stream: IO[str] | None = None) -> None:
    """Log to ``stream`` (the command's own non-blocking stderr; ``sys.stderr`` by default),
    masked, one record per line."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(MaskingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def log_to_command_stderr(level: str, fmt: str) -> None:
    """Log to stderr through the command's own buffer and writer thread (see :mod:`.streams`): a
    write to a stderr nobody reads never blocks the event loop, and log lines stay in order with
    the notices."""
    configure_logging(level, fmt, standard_output().log_stream())

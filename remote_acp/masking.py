"""Secret values, and how they are masked and agent text escaped wherever text leaves the process.

A value is secret when it was carried for the agent on purpose (``--ssh-pass-env``) or when the
variable holding it has a secret-looking name. Masking replaces every occurrence with ``***``,
longest value first, and always runs before any truncation, so no prefix of a secret survives a
cut: :meth:`Masker.excerpt` masks and bounds in one step, and :class:`StreamMasker` masks text
that arrives in pieces (a model streams a key a few characters per chunk) by holding back the
end of a piece while it could still be the start of a secret.

Log records are masked by :class:`MaskingFilter` against the secrets of every live session
(:func:`register` / :func:`unregister`, counted, so two sessions with the same value work).
The filter sits on ``remote_acp``'s own loggers, never on the embedding application's root
logger or handlers: a filter on a logger does not see its children's records, so
:func:`register` attaches it to every ``remote_acp.*`` logger that exists, and
:func:`remote_acp.logs.get_logger` to those created later.

:func:`escape_control` makes agent text safe to put in a line of text: no forged log lines,
no terminal escape sequences.
"""

from __future__ import annotations

import logging
import re
import shlex
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence

__all__ = [
    "MASK",
    "Masker",
    "MaskingFilter",
    "StreamMasker",
    "assigned_secrets",
    "escape_control",
    "install_filter",
    "live_masker",
    "mask_secrets",
    "register",
    "registered",
    "secret_values",
    "unregister",
]

MASK: Final = "***"
ELLIPSIS: Final = "…"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|COOKIE|AUTH", re.IGNORECASE)
_MIN_SECRET_LEN: Final = 4  # shorter values ("1", "yes") would mask ordinary words


def secret_values(env: Mapping[str, str], *, any_name: bool = False) -> tuple[str, ...]:
    """Values of variables whose names look secret (or of all, with ``any_name``), longest
    first so overlapping values mask fully. Values too short to mask safely are left out."""
    found = {v for k, v in env.items() if (any_name or _SECRET_NAME.search(k)) and len(v) >= _MIN_SECRET_LEN}
    return tuple(sorted(found, key=len, reverse=True))


def assigned_secrets(command: str | Sequence[str]) -> tuple[str, ...]:
    """Values of secret-looking variables a shell-fragment agent command assigns before its
    program (``OPENAI_API_KEY=sk-... qwen --acp``): the command's words are not the environment,
    but they reach the agent's, and what it echoes."""
    try:
        words = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError:
        return ()
    assigned: dict[str, str] = {}
    for word in words:
        name, equals, value = word.partition("=")
        if not (equals and name and name.replace("_", "a").isalnum() and not name[0].isdigit()):
            break
        assigned[name] = value
    return secret_values(assigned)


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    for value in secrets:
        if value in text:
            text = text.replace(value, MASK)
    return text


# -- escaping -----------------------------------------------------------------------------------

# C0 controls but tab, DEL, C1 controls (NEL among them), the Unicode line and paragraph
# separators, and the bidirectional overrides that make a terminal show text out of order.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEP_NEWLINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\x1b": "\\x1b"}


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_control(text: str, keep_newlines: bool = False) -> str:
    """``text`` with control characters written as escapes (``\\n``, ``\\r``, ``\\x1b``, ``\\u2028``):
    what an agent sends cannot start a line of its own or drive the terminal. ``keep_newlines``
    lets ``\\n`` through (multi-line notices); ``\\r`` is escaped either way."""
    pattern = _CONTROL_KEEP_NEWLINES if keep_newlines else _CONTROL
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape_one, text)


# -- masking ------------------------------------------------------------------------------------


def _cap(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[: max(0, cap - 1)] + ELLIPSIS


class Masker:
    """Masks one fixed set of secret values (immutable; build a new one when the set changes)."""

    __slots__ = ("_longest", "_pattern", "secrets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = sorted({s for s in secrets if len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True)
        self.secrets: tuple[str, ...] = tuple(values)
        # One alternation, longest value first: at each position the longest secret wins.
        self._pattern = re.compile("|".join(map(re.escape, values))) if values else None
        self._longest = len(values[0]) if values else 0

    def __bool__(self) -> bool:
        return self._pattern is not None

    def mask(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)

    def split_safe(self, text: str) -> tuple[str, str]:
        """Mask ``text`` and split it where what follows could still become a secret: ``(safe,
        held)``, ``held`` being the shortest-possible tail that is the start of some secret."""
        masked = self.mask(text)
        if self._pattern is None or not masked:
            return masked, ""
        held_from = len(masked)
        for secret in self.secrets:
            start = max(0, len(masked) - len(secret) + 1)
            first = secret[0]
            i = masked.find(first, start)
            while i != -1 and i < held_from:
                if secret.startswith(masked[i:]):
                    held_from = i
                    break
                i = masked.find(first, i + 1)
        return masked[:held_from], masked[held_from:]

    def excerpt(self, text: str, cap: int, *, cut: bool = False) -> str:
        """``text`` masked, then bounded to ``cap`` characters (a cut ends with an ellipsis).

        Only a window of the text is masked, so a huge text costs no more than a short one.
        ``cut``: ``text`` was itself cut from something longer, so a secret may continue past its
        end; a trailing start of a secret is dropped then too.
        """
        window = 2 * cap + self._longest
        if len(text) > window:
            text, cut = text[:window], True
        if not cut:
            return _cap(self.mask(text), cap)
        safe, _ = self.split_safe(text)
        return safe[: max(0, cap - 1)] + ELLIPSIS

    def quote(self, text: str, cap: int, *, cut: bool = False) -> str:
        """Hostile text made fit to quote in one line: masked, then escaped
        (:func:`escape_control`), then bounded to ``cap`` characters."""
        return _cap(escape_control(self.excerpt(text, cap, cut=cut)), cap)


class StreamMasker:
    """Masks text that arrives in pieces; what :meth:`feed` returns, joined, is the whole text
    masked, once :meth:`finish` has returned the rest."""

    __slots__ = ("_held", "masker")

    def __init__(self, masker: Masker) -> None:
        self.masker = masker
        self._held = ""

    def feed(self, piece: str) -> str:
        if not self.masker:
            return piece
        safe, self._held = self.masker.split_safe(self._held + piece)
        return safe

    def finish(self) -> str:
        """The text held back, masked (the stream ended: nothing more can complete a secret)."""
        held, self._held = self._held, ""
        return self.masker.mask(held)

    @property
    def holding(self) -> bool:
        return bool(self._held)


# -- the live secrets of this process and the logging filter ------------------------------------

_lock = threading.Lock()
_live_counts: dict[str, int] = {}
_live: Masker = Masker()


def live_masker() -> Masker:
    """A masker for the secrets of every session live in this process."""
    return _live


def register(secrets: Iterable[str]) -> None:
    """Count ``secrets`` as live (a session started): log records are masked against them, and
    every ``remote_acp`` logger gets the masking filter."""
    global _live
    values = tuple(secrets)
    with _lock:
        for value in values:
            _live_counts[value] = _live_counts.get(value, 0) + 1
        _live = Masker(_live_counts)
    _install_on_package_loggers()


def unregister(secrets: Iterable[str]) -> None:
    """Undo one :func:`register` of ``secrets`` (the session ended)."""
    global _live
    with _lock:
        for value in tuple(secrets):
            count = _live_counts.get(value, 0) - 1
            if count > 0:
                _live_counts[value] = count
            else:
                _live_counts.pop(value, None)
        _live = Masker(_live_counts)


@contextmanager
def registered(secrets: Iterable[str]) -> Iterator[None]:
    values = tuple(secrets)
    register(values)
    try:
        yield
    finally:
        unregister(values)


# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD: Final = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


class MaskingFilter(logging.Filter):
    """Masks the live secrets in a record's message, arguments and ``extra`` fields.

    The message is rendered once (``msg % args``) and masked as a whole, so an argument of any
    type is covered. An ``extra`` value that is not a string is replaced by its masked text only
    when that text held a secret, so the JSON log keeps its structure otherwise. Never raises:
    a filter that raised would break the caller's log call.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        masker = _live
        if not masker:
            return True
        try:
            message = record.getMessage()
            record.msg, record.args = masker.mask(message), None
            for key, value in list(record.__dict__.items()):
                if key in _STANDARD or value is None or isinstance(value, bool | int | float):
                    continue
                text = value if isinstance(value, str) else str(value)
                masked = masker.mask(text)
                if masked != text:
                    setattr(record, key, masked)
        except Exception:  # a record we cannot render is withheld, not leaked
            record.msg, record.args = "a log record could not be masked and was withheld", None
            for key in [k for k in record.__dict__ if k not in _STANDARD]:
                delattr(record, key)
        return True


_FILTER: Final = MaskingFilter()


def install_filter(logger: logging.Logger) -> logging.Logger:
    """Attach the masking filter to ``logger`` (once) and return it."""
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


def _install_on_package_loggers() -> None:
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if (name == "remote_acp" or name.startswith("remote_acp.")) and isinstance(logger, logging.Logger):
            install_filter(logger)

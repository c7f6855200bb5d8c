"""What a source may say about a host, validated with pydantic (imported only by :meth:`Host.from_fields`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from .models import DEFAULT_CAPACITY, MAX_NAME

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["validated"]


def _name(text: str) -> str:
    # A space is the one blank str.isprintable() lets through.
    if text.startswith("-") or not text.isprintable() or " " in text:
        raise ValueError("must be printable, without blanks, and not start with '-'")
    return text


_KEYWORD: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
_STRUCTURE: Final = frozenset({"host", "match", "include"})
"""ssh_config lines that are no option: as an option they would open a block of their own
(``Match exec`` runs a command) or read another file, whatever the host's other options say."""


def _options(options: dict[str, str]) -> dict[str, str]:
    from .ssh_keywords import misspelt

    for keyword, value in options.items():
        if not _KEYWORD.match(keyword):
            raise ValueError(f"{keyword!r} is not an ssh_config keyword (letters and digits)")
        if keyword.lower() in _STRUCTURE:
            raise ValueError(f"{keyword} is not an ssh option: it starts a block or reads a file, refused")
        if any(c in value for c in "\r\n\0"):
            raise ValueError(f"the value of {keyword} holds a line break or NUL")
        meant = misspelt(keyword)
        if meant is not None:
            raise ValueError(f"{keyword!r} is not an ssh_config keyword: did you mean {meant}?")
    return options


Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME), AfterValidator(_name)]
"""A host name, group or alias: printable, no blanks, not starting with ``-`` (it would read as
an ssh option)."""


class _HostFields(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    name: Name
    address: Name | None = None
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    user: Name | None = None
    identity_file: Annotated[str, StringConstraints(min_length=1)] | None = None
    groups: tuple[Name, ...] = ()
    labels: dict[str, str] = Field(default_factory=dict)
    capacity: Annotated[int, Field(ge=1, le=10_000)] = DEFAULT_CAPACITY
    ssh_options: Annotated[dict[Name, str], AfterValidator(_options)] = Field(default_factory=dict)
    sources: tuple[str, ...] = ()


def validated(fields: Mapping[str, object]) -> dict[str, Any]:
    """``fields`` validated, every field present, and ``fields_set``: the keys given.

    :raises pydantic.ValidationError: a value is refused (``loc`` names the field).
    """
    model = _HostFields.model_validate(fields)
    return {**dict(model), "fields_set": frozenset(model.model_fields_set)}

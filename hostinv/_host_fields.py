"""What a source may say about a host, validated with pydantic (imported only by :meth:`Host.from_fields`).

The pydantic model is derived from the dataclass (:class:`hostinv.models.Host`, passed in, so
this module needs nothing of :mod:`hostinv.models` and no import runs back to it): each field's
type and default as declared there, narrowed by what its ``metadata`` says a source may give
(``name``: names of at most that many characters; ``range``: the lowest and highest whole
number; ``nonempty``: no empty text; ``ssh_options``: ssh_config keywords and one-line values).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from typing import TYPE_CHECKING, Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, create_model

from .ssh_keywords import misspelt

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

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


def _within(hint: Any, checked: Any) -> Any:
    """``hint`` with the values a rule applies to replaced by ``checked``: the value itself, an
    optional's value, a tuple's items, a mapping's keys."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return tuple[checked, ...]
    if origin is dict:
        return dict[checked, args[1]]  # type: ignore[valid-type]
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        return checked | None
    return checked


def _checked(hint: Any, rules: Mapping[str, Any]) -> Any:
    """The annotation validating a field of type ``hint`` under its ``rules`` (its metadata)."""
    if "name" in rules:
        name = Annotated[str, StringConstraints(min_length=1, max_length=rules["name"]), AfterValidator(_name)]
        hint = _within(hint, name)
    if "range" in rules:
        low, high = rules["range"]
        hint = _within(hint, Annotated[int, Field(ge=low, le=high)])
    if rules.get("nonempty"):
        hint = _within(hint, Annotated[str, StringConstraints(min_length=1)])
    if rules.get("ssh_options"):
        hint = Annotated[hint, AfterValidator(_options)]
    return hint


_MODELS: dict[tuple[type[Any], tuple[str, ...]], type[BaseModel]] = {}


def _model(cls: type[Any], names: tuple[str, ...]) -> type[BaseModel]:
    """The pydantic model of the dataclass ``cls``'s fields ``names`` (made once): their types and
    defaults, checked as their metadata says; values stripped, no other field taken, frozen."""
    made = _MODELS.get((cls, names))
    if made is not None:
        return made
    hints = typing.get_type_hints(cls)
    declared = {f.name: f for f in dataclasses.fields(cls)}
    fields: dict[str, Any] = {}
    for name in names:
        field = declared[name]
        if field.default_factory is not dataclasses.MISSING:
            default: Any = Field(default_factory=field.default_factory)
        else:
            default = ... if field.default is dataclasses.MISSING else field.default
        fields[name] = (_checked(hints[name], field.metadata), default)
    config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)
    made = _MODELS[(cls, names)] = create_model(f"{cls.__name__}Fields", __config__=config, **fields)
    return made


def validated(cls: type[Any], names: Sequence[str], fields: Mapping[str, object]) -> dict[str, Any]:
    """``fields`` validated as the fields ``names`` of the dataclass ``cls``, every one present,
    and ``fields_set``: the keys given.

    :raises pydantic.ValidationError: a value is refused (``loc`` names the field).
    """
    model = _model(cls, tuple(names)).model_validate(fields)
    return {**dict(model), "fields_set": frozenset(model.model_fields_set)}

"""Secret values and how they are masked wherever text leaves the process.

A value is secret when it was carried for the agent on purpose (``--ssh-pass-env``) or when the
variable holding it has a secret-looking name. Masking replaces every occurrence with ``***``,
longest value first, and always runs before any truncation, so no prefix of a secret survives.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["MASK", "mask_secrets", "secret_values"]

MASK: Final = "***"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|COOKIE|AUTH", re.IGNORECASE)
_MIN_SECRET_LEN: Final = 4  # shorter values ("1", "yes") would mask ordinary words


def secret_values(env: Mapping[str, str], *, any_name: bool = False) -> tuple[str, ...]:
    """Values of variables whose names look secret (or of all, with ``any_name``), longest
    first so overlapping values mask fully. Values too short to mask safely are left out."""
    found = {v for k, v in env.items() if (any_name or _SECRET_NAME.search(k)) and len(v) >= _MIN_SECRET_LEN}
    return tuple(sorted(found, key=len, reverse=True))


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    for value in secrets:
        if value in text:
            text = text.replace(value, MASK)
    return text

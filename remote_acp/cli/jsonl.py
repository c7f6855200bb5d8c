"""One JSON object per line, pure ASCII: what every ``--json`` output writes.

Its own module so that a command printing JSON (``check host``, ``inventory list``,
``sessions``, ``validate``) does not load :mod:`.render` and the event vocabulary it renders.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["json_line"]


def json_line(obj: dict[str, Any]) -> str:
    """``obj`` as one line of ASCII JSON (encodable in any locale, whatever the agent sent)."""
    return json.dumps(obj, ensure_ascii=True, default=str)

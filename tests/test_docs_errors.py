"""docs/errors.md lists every cause as the table says: its verdict, its retry class and its fix."""

from __future__ import annotations

import re
from pathlib import Path

from hostinv.causes import CAUSES, Cause

DOC = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
ROW = re.compile(r"^\| `(?P<cause>[a-z_]+)` \| (?P<verdict>[^|]+) \| (?P<retry>yes|no) \| (?P<fix>.+) \|$")


def documented() -> dict[str, tuple[str, str, str]]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if match := ROW.match(line):
            rows[match["cause"]] = (match["verdict"].strip(), match["retry"], match["fix"].strip())
    return rows


def test_every_cause_is_documented_with_its_verdict_retry_class_and_fix() -> None:
    rows = documented()
    assert set(rows) == {cause.value for cause in Cause}
    for cause in Cause:
        info = CAUSES[cause]
        verdict, retry, fix = rows[cause.value]
        assert verdict == (f"`{info.verdict}`" if info.verdict else "-"), cause
        assert retry == ("yes" if info.retryable else "no"), cause
        assert fix == (info.fix.replace("{", "<").replace("}", ">") if info.fix else "-"), cause

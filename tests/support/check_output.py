"""Reading ``remote-acp check host``'s text output back as data: the summary table (one row per
host, cells that a narrow terminal folded onto further lines joined again, the host's name
included) and the lines after it, ``host (verdict): message`` and ``  fix: ...``, which are
never cut."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["CheckOutput", "Detail", "read_check_output"]

_DETAIL = re.compile(r"^(?P<host>\S+) \((?P<verdict>[a-z_]+)\): (?P<message>.*)$")
_FIX = "  fix: "
_LATENCY = re.compile(r"\d+ ms")  # every host's row starts with its latency; a folded line has none


@dataclass
class Detail:
    """What the output says after the table about one host that is not ready."""

    verdict: str
    message: str
    fix: str | None = None


@dataclass
class CheckOutput:
    header: list[str]
    rows: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per host, in the table's order: column name to cell."""
    details: dict[str, Detail] = field(default_factory=dict)


def read_check_output(stdout: str) -> CheckOutput:
    """The table and the detail lines of ``stdout``; fails on a line it cannot place."""
    header_line, *lines = stdout.splitlines()
    header = header_line.split()
    starts = [header_line.index(name) for name in header]
    # a cell's room: up to the next column's two spaces of padding (the last: to the line's end)
    widths = [b - a - 2 for a, b in zip(starts, starts[1:], strict=False)] + [len(header_line) - starts[-1]]
    out = CheckOutput(header)
    rows: list[dict[str, str]] = []
    last: dict[str, str] | None = None
    detail: Detail | None = None
    for line in lines:
        if detail is not None or _DETAIL.match(line):
            if line.startswith(_FIX):
                assert detail is not None and detail.fix is None, line
                detail.fix = line[len(_FIX) :]
                continue
            found = _DETAIL.match(line)
            assert found is not None, f"not a detail line: {line!r}"
            detail = Detail(found["verdict"], found["message"])
            out.details[found["host"]] = detail
            continue
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        if not _LATENCY.match(cells[header.index("latency")]):  # a folded cell goes on under its column
            assert last is not None, line
            for name, cell, width in zip(header, cells, widths, strict=True):
                if cell:  # cut at the column's edge, or wrapped at a space (which rich drops)
                    last[name] += cell if len(last[name]) >= width else " " + cell
            continue
        last = dict(zip(header, cells, strict=True))
        rows.append(last)
    out.rows = {row[header[0]]: row for row in rows}  # named once the folded names are whole
    return out

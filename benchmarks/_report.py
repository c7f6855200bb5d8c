"""What the benchmarks print: sections, aligned tables, figures with their units, and the
targets (DESIGN section 5) each run checks, printed at its end and saved for ``run_all``.

Nothing here asserts anything: a missed target is printed as ``MISS``, not raised.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

__all__ = ["Check", "Summary", "Table", "fmt_mib", "fmt_ms", "fmt_rate", "fmt_s", "section"]


def fmt_s(seconds: float) -> str:
    return f"{seconds:.3f} s"


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def fmt_mib(kib: float) -> str:
    return f"{kib / 1024:.1f} MiB"


def fmt_rate(per_s: float) -> str:
    return f"{per_s:,.0f}/s"


def section(title: str) -> None:
    print()
    print(f"== {title} ==")


class Table:
    """A plain aligned text table (first column left-aligned, the others right-aligned)."""

    def __init__(self, *headers: str) -> None:
        self.headers = headers
        self.rows: list[tuple[str, ...]] = []

    def add(self, *cells: str) -> None:
        self.rows.append(tuple(cells) + ("",) * (len(self.headers) - len(cells)))

    def print(self) -> None:
        widths = [max(len(row[i]) for row in [self.headers, *self.rows]) for i in range(len(self.headers))]

        def line(cells: tuple[str, ...]) -> str:
            parts = [cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
            return "  ".join(parts).rstrip()

        print(line(self.headers))
        print("  ".join("-" * w for w in widths))
        for row in self.rows:
            print(line(row))


@dataclass(slots=True)
class Check:
    """One DESIGN §5 target: the measured figure against its bound."""

    figure: str
    measured: float
    target: float
    unit: str
    higher_is_better: bool = False
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.measured >= self.target if self.higher_is_better else self.measured <= self.target

    @property
    def ratio(self) -> float:
        """measured / target: <= 1 passes for a bound on time or memory, >= 1 for a rate."""
        return self.measured / self.target if self.target else float("nan")

    def describe(self) -> str:
        op = ">=" if self.higher_is_better else "<="
        verdict = "PASS" if self.passed else "MISS"
        text = (
            f"{verdict}  {self.figure}: {_fmt_unit(self.measured, self.unit)} "
            f"(target {op} {_fmt_unit(self.target, self.unit)}; measured/target {self.ratio:.2f})"
        )
        return text + (f"  [{self.note}]" if self.note else "")


def _fmt_unit(value: float, unit: str) -> str:
    if unit == "s":
        return fmt_s(value)
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "MiB":
        return f"{value:.1f} MiB"
    if unit == "/s":
        return fmt_rate(value)
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "%":
        return f"{value:.0%}"
    return f"{value:g} {unit}"


@dataclass(slots=True)
class Summary:
    """The checks of one benchmark run, printed at its end and optionally saved for run_all."""

    name: str
    checks: list[Check] = field(default_factory=list)
    leftovers: list[int] = field(default_factory=list)

    def add(self, check: Check) -> None:
        self.checks.append(check)

    def print(self) -> None:
        section(f"{self.name}: targets")
        for check in self.checks:
            print(check.describe())
        print(f"leftover processes after this benchmark: {len(self.leftovers)} {self.leftovers or ''}".rstrip())

    def save(self, path: str | None) -> None:
        if not path:
            return
        payload = {"name": self.name, "checks": [asdict(c) for c in self.checks], "leftovers": self.leftovers}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(payload, fh)

    @staticmethod
    def load(path: str) -> Summary:
        with open(path, encoding="utf-8") as fh:
            payload = json.load(fh)
        return Summary(payload["name"], [Check(**c) for c in payload["checks"]], list(payload.get("leftovers", [])))

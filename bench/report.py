"""Results: rows of (workload, redis, topicsrv, ratio, target), printed as one table and saved as JSON.

Rule 1: a ratio is always topicsrv / redis-server from the same run; for "lower is better"
rows (memory, latency) the target is a maximum, otherwise a minimum.
Rule 2: a cell that failed holds its error text; its row is reported, never dropped, and its
target status is "error" (or "pending" when the measurement does not exist yet).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson


@dataclass
class Row:
    section: str
    workload: str
    unit: str
    redis: float | str | None = None
    topicsrv: float | str | None = None
    target: float | None = None  # on the ratio (or on the topicsrv value when redis is None)
    lower_is_better: bool = False
    ref_note: str = ""  # what the ratio compares against when redis is a reference figure
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if isinstance(self.redis, int | float) and isinstance(self.topicsrv, int | float) \
                and self.redis > 0:
            return self.topicsrv / self.redis
        return None

    @property
    def status(self) -> str:
        if isinstance(self.topicsrv, str) or isinstance(self.redis, str):
            bad = self.topicsrv if isinstance(self.topicsrv, str) else self.redis
            return "pending" if isinstance(bad, str) and bad.startswith("pending") else "error"
        if self.target is None:
            return ""
        value = self.ratio if self.redis is not None else self.topicsrv
        if value is None:
            return "error"
        ok = value <= self.target if self.lower_is_better else value >= self.target
        return "ok" if ok else "MISS"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ratio"] = self.ratio
        d["status"] = self.status
        return d


def attempt(fn: Callable[[], Any]) -> Any:
    """Rule 2: `fn()`, or its error as the cell's text (printed on stderr too)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - one failing cell must not end the run
        text = f"error: {exc}".replace("\n", " ")
        print(f"  ! {text}", file=sys.stderr)
        return text


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "python": sys.version.split()[0],
            "platform": platform.platform()}


def _fmt(value: float | str | None, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value if len(value) <= 22 else value[:21] + "…"
    if unit in ("us", "ms", "ns"):
        return f"{value:,.2f}"
    if unit.startswith("B/") or value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def render(rows: list[Row], mode: str) -> str:
    head = ("workload", "unit", "redis", "topicsrv", "ratio", "target", "")
    lines = [head]
    last = None
    for r in rows:
        if r.section != last:
            lines.append((f"-- {r.section}", "", "", "", "", "", ""))
            last = r.section
        ratio = f"{r.ratio:.2f}" if r.ratio is not None else "-"
        if r.target is None:
            target = ""
        else:
            target = ("<= " if r.lower_is_better else ">= ") + f"{r.target:g}"
        lines.append((r.workload, r.unit, _fmt(r.redis, r.unit), _fmt(r.topicsrv, r.unit),
                      ratio, target, r.status))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = [f"topicsrv vs redis-server ({mode} mode); ratio = topicsrv / redis"]
    for line in lines:
        cells = [line[0].ljust(widths[0]), line[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(line[2:6], widths[2:6], strict=True)]
        cells.append(line[6])
        out.append("  ".join(cells).rstrip())
    notes = [f"  * {r.workload}: {r.ref_note}" for r in rows if r.ref_note]
    if notes:
        out.append("notes:")
        out.extend(notes)
    return "\n".join(out)


def save(path: Path, rows: list[Row], mode: str, sizes: dict[str, int],
         extra: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"mode": mode, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "machine": machine(), "sizes": sizes, "rows": [r.to_json() for r in rows], **extra}
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))

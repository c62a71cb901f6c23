"""Measurements and the printed table (rows, seconds, rows/s, ratio against each peer)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Measurement:
    """One timed run. ``rows`` is what the run counted, not what it was asked to read."""

    name: str
    kind: str  # "cdc-mysql", "peer" or "ceiling" (bench/ceiling.py)
    rows: int
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None  # why the run did not happen

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["rows_per_second"] = round(self.rows_per_second, 1)
        return data


def best_of(runs: list[Measurement]) -> Measurement:
    """The fastest of repeated runs of one case; every run's seconds stay in its details."""
    best = max(runs, key=lambda r: r.rows_per_second)
    if len(runs) > 1:
        best.details["all_seconds"] = [round(r.seconds, 3) for r in runs]
    return best


def load_average() -> float:
    return os.getloadavg()[0]


def skipped(name: str, reason: str) -> Measurement:
    return Measurement(name, "peer", 0, 0.0, skipped=reason)


def ratio(mine: Measurement, peer: Measurement) -> str:
    if peer.skipped or mine.skipped or peer.rows_per_second == 0:
        return "-"
    return f"{mine.rows_per_second / peer.rows_per_second:.2f}x"


def render(title: str, runs: list[Measurement], peers: list[Measurement]) -> str:
    """A fixed-width table: every run, then ratio columns against each measured peer."""
    measured_peers = [p for p in peers if not p.skipped]
    header = ["case", "rows", "seconds", "rows/s", "load"]
    header += [f"vs {p.name}" for p in measured_peers]
    lines: list[list[str]] = []
    for run in runs + measured_peers:
        cells = [
            run.name,
            f"{run.rows:,}",
            f"{run.seconds:.2f}",
            f"{run.rows_per_second:,.0f}",
            f"{run.details['load_1m']:.1f}" if "load_1m" in run.details else "",
        ]
        cells += [ratio(run, p) if run.kind != "peer" else "" for p in measured_peers]
        lines.append(cells)
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(row[1:], widths[1:])]
        return "  ".join([first, *rest]).rstrip()

    out = [title, fmt(header), "  ".join("-" * w for w in widths)]
    out += [fmt(row) for row in lines]
    out.append(
        "load: the machine's 1-minute load average when the run started "
        f"({os.cpu_count()} CPUs); other work on the machine slows every case"
    )
    for peer in peers:
        if peer.skipped:
            out.append(f"peer '{peer.name}' skipped: {peer.skipped}")
    return "\n".join(out)

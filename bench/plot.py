"""The benchmark's picture: two panels drawn from the rows the same run measured.

Left: microseconds per record against batch size (the *scale* rows), ours and Powertools. Right: the latency of
a 10-record batch when every DynamoDB call takes 10 ms (the *latency* rows), ours and Powertools, against the
floor of two round trips. matplotlib is in the benchmark environment only (``bench/requirements.txt``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

OURS, POWERTOOLS, FLOOR = "#1b6ac9", "#d9822b", "#444444"


def can_plot(rows: list[Any]) -> bool:
    """Whether the run measured what the picture shows (``--only`` may have left the groups out)."""
    kinds = {row.plot for row in rows}
    return {"scale", "latency", "floor"} <= kinds


def write(rows: list[Any], path: Path, title: str) -> None:
    """Draw the picture of ``rows`` (``run.Row``s) into the PNG ``path``."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    scale = [row for row in rows if row.plot == "scale"]
    (latency,) = [row for row in rows if row.plot == "latency"]
    (floor,) = [row for row in rows if row.plot == "floor"]

    figure = Figure(figsize=(10, 4), layout="constrained")
    figure.suptitle(title, fontsize=9, color=FLOOR)
    left, right = figure.subplots(1, 2, width_ratios=(1.1, 1))

    sizes = [row.records for row in scale]
    left.plot(sizes, [row.powertools for row in scale], "o-", color=POWERTOOLS, label="Powertools")
    left.plot(sizes, [row.ours for row in scale], "o-", color=OURS, label="idempotent-consumer")
    left.set_xscale("log")
    left.set_xticks(sizes, [f"{n:,}" for n in sizes])
    left.set_ylim(0, 1.15 * max(max(row.ours, row.powertools) for row in scale))
    left.set_xlabel("records in the batch")
    left.set_ylabel("µs per record (lower is better)")
    left.set_title("Per-record time, in-memory store", fontsize=10)
    left.grid(True, alpha=0.3)
    left.legend(loc="lower left")

    names = ["Powertools", "idempotent-consumer"]
    values = [latency.powertools, latency.ours]
    bars = right.barh(names, values, color=[POWERTOOLS, OURS], height=0.5)
    right.bar_label(bars, [f"{v:.1f} ms" for v in values], padding=4)
    right.axvline(floor.ours, color=FLOOR, linestyle="--", linewidth=1)
    right.annotate(f"floor: 2 round trips\n= {floor.ours:.1f} ms", (floor.ours, 1.35), xytext=(6, 0),
                   textcoords="offset points", va="center", fontsize=8, color=FLOOR)  # fmt: skip
    right.set_xlim(0, 1.2 * max(values))
    right.set_ylim(-0.5, 1.7)
    right.set_xlabel("ms for the batch (lower is better)")
    right.set_title(f"A {latency.records}-record batch, every DynamoDB call 10 ms", fontsize=10)
    right.grid(True, axis="x", alpha=0.3)

    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)

"""The Markdown table of a ``bench.run`` results file (for docs/performance.md).

    python -m bench.report_table bench/results/<timestamp>.json
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Optional

__all__ = ["markdown_table"]


def _rate(value: Optional[float]) -> str:
    return "-" if not value else f"{value / 1000:,.0f}k"


def _ratio(ours: Optional[float], theirs: Optional[float]) -> str:
    return "-" if not ours or not theirs else f"**{ours / theirs:.2f}x**"


def markdown_table(results: Dict[str, Any]) -> str:
    """Records per second of every contender on every workload, and the target ratios."""
    rates: Dict[str, Dict[str, float]] = results.get("rates", {})
    lines: List[str] = [
        "| workload | mode | kafka-group -> noop | (S1) | read / (S1) | kafka-group + DeltaSink | (S2) "
        "| end to end / (S2) | (K) | (a) | (a2) | (b) kcat |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for topic, r in rates.items():
        name = topic.removeprefix("bench-")
        lines.append(f"| {name} | drain | {_rate(r.get('kg_noop'))} | {_rate(r.get('s1'))} | "
                     f"{_ratio(r.get('kg_noop'), r.get('s1'))} | {_rate(r.get('kg_delta'))} | {_rate(r.get('s2'))} | "
                     f"{_ratio(r.get('kg_delta'), r.get('s2'))} | {_rate(r.get('k'))} | {_rate(r.get('a'))} | "
                     f"{_rate(r.get('a2'))} | {_rate(r.get('b'))} |")
        if "steady_kg_noop" in r:
            lines.append(f"| {name} | steady | {_rate(r.get('steady_kg_noop'))} | {_rate(r.get('steady_s1'))} | "
                         f"{_ratio(r.get('steady_kg_noop'), r.get('steady_s1'))} | {_rate(r.get('steady_kg_delta'))} "
                         f"| {_rate(r.get('steady_s2'))} | {_ratio(r.get('steady_kg_delta'), r.get('steady_s2'))} "
                         "| | | | |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write(__doc__ or "")
        return 2
    with open(args[0]) as f:
        sys.stdout.write(markdown_table(json.load(f)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

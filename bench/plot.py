"""The plot of ``python -m bench.run``: records per second by workload for each contender."""

from __future__ import annotations

from typing import Dict, List, Tuple

__all__ = ["draw_rates", "SERIES"]

#: (key in the run's rates, legend label), in the order drawn.
SERIES: List[Tuple[str, str]] = [
    ("kg_noop", "kafka-group -> noop"),
    ("s1", "(S1) format(kafka) -> noop"),
    ("kg_delta", "kafka-group + DeltaSink"),
    ("s2", "(S2) format(kafka) + delta-spark"),
    ("k", "(K) kafka-consumer-perf-test"),
    ("a", "(a) confluent-kafka, 1 process"),
    ("a2", "(a2) read path to Arrow, 1 process"),
    ("b", "(b) kcat"),
]


def draw_rates(rates: Dict[str, Dict[str, float]], path: str, *, title: str) -> None:
    """Draw grouped bars (log scale) of ``rates[workload][contender]`` into a PNG at ``path``.

    Workloads with steady runs (``steady_<contender>`` keys) get a second group for them.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: List[Tuple[str, Dict[str, float]]] = []
    for topic, by_key in rates.items():
        name = topic.removeprefix("bench-")
        groups.append((f"{name}\ndrain", {k: v for k, v in by_key.items() if not k.startswith("steady_")}))
        steady = {k.removeprefix("steady_"): v for k, v in by_key.items() if k.startswith("steady_")}
        if steady:
            groups.append((f"{name}\nsteady", steady))
    width = 0.8 / len(SERIES)
    figure, axes = plt.subplots(figsize=(max(8.0, 1.3 * len(groups)), 5.5))
    for i, (key, label) in enumerate(SERIES):
        xs = [g + (i - len(SERIES) / 2 + 0.5) * width for g, (_, values) in enumerate(groups) if values.get(key)]
        ys = [values[key] for _, values in groups if values.get(key)]
        axes.bar(xs, ys, width=width, label=label)
    axes.set_yscale("log")
    axes.set_ylabel("records/s (log scale)")
    axes.set_xticks(range(len(groups)))
    axes.set_xticklabels([name for name, _ in groups], fontsize=8)
    axes.set_title(title)
    axes.grid(axis="y", which="both", alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)

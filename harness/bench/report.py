"""How the benchmarks show their results: plain text tables and grouped bar charts (matplotlib, Agg).

    >>> print_rows([{"mode": "cpc", "p50_ms": 151.2}], [("mode", "mode", "{}"), ("p50_ms", "p50 ms", "{:.0f}")])
    mode p50 ms
    cpc     151
"""

from __future__ import annotations

import sys

LATENCY_COLUMNS = (("p50_ms", "p50 ms", "{:8.0f}"), ("p95_ms", "p95 ms", "{:8.0f}"), ("lm_calls", "calls", "{:6.1f}"))


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None



def pyplot():
    """matplotlib's pyplot on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def grouped_bars(
    axis, groups: list[str], series: dict[str, list[float]], *, colors: dict[str, str] | None = None,
    label_format: str | None = None, total_width: float = 0.76,
) -> None:
    """One group of bars per entry of ``groups``, one bar per series in each (``series[name][k]`` for group k)."""
    width = total_width / max(1, len(series))
    for number, (name, values) in enumerate(series.items()):
        offset = (number - (len(series) - 1) / 2) * width
        bars = axis.bar(
            [k + offset for k in range(len(groups))], values, width, label=name,
            color=(colors or {}).get(name),
        )
        if label_format:
            axis.bar_label(bars, fmt=label_format, fontsize=8)
    axis.set_xticks(range(len(groups)), groups)



def print_rows(rows: list[dict], columns: list[tuple[str, str, str]], stream=None) -> None:
    """A plain text table: ``columns`` are ``(key, header, format)``; text left-aligned, numbers right-aligned."""
    stream = stream or sys.stdout
    cells = [[spec.format(row[key]) for key, _, spec in columns] for row in rows]
    widths = [max([len(header), *(len(line[k]) for line in cells)]) for k, (_, header, _) in enumerate(columns)]
    text = [bool(rows) and isinstance(rows[0][key], str) for key, _, _ in columns]

    def line(values: list[str]) -> str:
        return " ".join(v.ljust(w) if left else v.rjust(w) for v, w, left in zip(values, widths, text))

    print(line([header for _, header, _ in columns]).rstrip(), file=stream)
    for values in cells:
        print(line(values).rstrip(), file=stream)

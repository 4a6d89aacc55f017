"""The PNG report: the speedups as grouped bars, one subplot per mode, with a geomean group.

matplotlib is imported only inside :func:`write_png` (ImportError when it is not installed: the report
writer turns that into one line). No torch.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_xla_dynamo.fileio import atomic_write
from pytest_xla_dynamo.records import CaseRecord
from pytest_xla_dynamo.report.jsonl import environment_info
from pytest_xla_dynamo.report.tables import (
    SEED_LABELS,
    compared,
    format_speedup,
    geomean,
    iterations_text,
    latest,
    ordered,
    record_speedup,
    timing_modes,
)


def write_png(records: Iterable[CaseRecord], path: str | os.PathLike[str],
              environment: dict[str, Any] | None = None, *, baseline: str | None = None) -> Path:
    """Grouped bars of the speedups (a group per model, a bar per backend, a last hatched ``geomean``
    group), one subplot per mode, a line at 1.0, titled with the versions and the date.

    Uses matplotlib's object API on the Agg canvas (no pyplot, so the process's matplotlib backend is
    left alone). ImportError when matplotlib is not installed.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    records = list(records)
    modes = timing_modes(records) or ["train"]
    env = environment if environment is not None else environment_info()
    versions = env.get("versions", {})
    base, chosen = compared(records, baseline)
    all_models = ordered(r.name for r in chosen)
    figure = Figure(figsize=(max(8.0, 1.1 * (len(all_models) + 1) + 2), 3.6 * len(modes) + 0.6),
                    layout="constrained")
    FigureCanvasAgg(figure)
    figure.suptitle(f"speedup over {base}\ntorch {versions.get('torch') or '?'}, torch_xla "
                    f"{versions.get('torch_xla') or '?'}, PJRT_DEVICE={env.get('PJRT_DEVICE') or '?'}, "
                    f"{str(env.get('date', ''))[:10]}", fontsize=10)
    axes = figure.subplots(len(modes), 1, squeeze=False)[:, 0]
    for ax, mode in zip(axes, modes, strict=True):
        in_mode = [r for r in chosen if r.mode == mode]
        cells = latest(in_mode)
        models = ordered(r.name for r in in_mode)
        backends = ordered(r.backend for r in in_mode)
        groups = [*models, "geomean"]
        width = 0.8 / max(1, len(backends))
        for i, backend in enumerate(backends):
            values: list[float] = []
            for model in models:
                record = cells.get((model, backend, mode))
                value = record_speedup(record) if record is not None else None
                values.append(math.nan if value is None else value)
                if value is None:
                    ax.text(len(values) - 1 + (i - (len(backends) - 1) / 2) * width, 0.02,
                            record.status if record is not None else "missing", rotation=90,
                            ha="center", va="bottom", fontsize=7, transform=ax.get_xaxis_transform())
            mean = geomean(v for v in values if not math.isnan(v))
            xs = [j + (i - (len(backends) - 1) / 2) * width for j in range(len(groups))]
            bars = ax.bar(xs, [*values, math.nan if mean is None else mean], width,
                          label=SEED_LABELS.get(backend, backend))
            bars[-1].set_hatch("//")
            if mean is not None:
                ax.annotate(format_speedup(mean), (xs[-1], mean), ha="center", va="bottom", fontsize=8)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        if models:
            ax.axvline(len(models) - 0.5, color="grey", linewidth=0.6)
        ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right")
        ax.set_ylabel(f"speedup over {base}")
        ax.set_title(f"{mode} ({iterations_text(in_mode, env.get('iterations_per_run'))})")
        if backends:
            ax.legend(fontsize=8)
    with atomic_write(path, binary=True) as f:
        figure.savefig(f, format="png", dpi=100)
    return Path(path)

"""The session's results: the seed's speedup tables, the parity status table, CSV, JSON Lines and PNG.

Everything here works from :class:`~pytest_xla_dynamo.records.CaseRecord` lists, so the writers are pure
functions (unit-testable with hand-made records) and :class:`ReportPlugin` only wires them into pytest:
on the controller (never on an xdist worker, whose records reach the controller through
``workeroutput``, nor in an isolated test's child session, whose records reach the parent), it
writes the files selected by ``--xla-report`` into ``--xla-report-dir`` at ``pytest_sessionfinish``
and prints the tables and the written paths in the ``xla-dynamo results``
section of the terminal summary. A report that cannot be written is an error line and a failing exit
status; ``png`` without matplotlib is one line saying so. Every file is written to a temporary file in
its folder and moved into place (``os.replace``), so a failing writer leaves nothing half-written.

CSV: the columns of pytorch's ``benchmarks/dynamo`` performance CSV (:data:`HARNESS_COLUMNS`) followed
by ours (:data:`EXTRA_COLUMNS`). A value that was not measured is an empty cell (the harness writes 0
for counters it did not read; an empty cell keeps "not measured" apart from a real 0). Floats carry 6
decimals, as the harness writes them. ``fallbacks_to_eager`` holds the record's ``fallbacks`` (ops that
left the XLA graph for a CPU ``aten::`` fallback) unless ``extra`` names ``fallbacks_to_eager`` itself;
``compression_ratio``, the peak memories and the autograd counters come from ``extra`` when a suite
measured them.

No torch is imported here; matplotlib only inside :func:`write_png`.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import platform
import socket
import statistics
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import pytest

from pytest_xla_dynamo.config import MODES, get_config
from pytest_xla_dynamo.records import PASSING, WORKEROUTPUT_KEY, CaseRecord, get_store

TIMING_SUITE = "timing"
PARITY_SUITE = "parity"
SECTION = "xla-dynamo results"
BASENAME = "xla-dynamo"  # report files: xla-dynamo.csv, xla-dynamo.jsonl, xla-dynamo.png
FILE_FORMATS = ("csv", "json", "png")
FILE_SUFFIX = {"csv": ".csv", "json": ".jsonl", "png": ".png"}

# pytorch benchmarks/dynamo/common.py, performance CSV (--performance), in its order.
HARNESS_COLUMNS = (
    "dev", "name", "batch_size", "speedup", "abs_latency", "compilation_latency", "compression_ratio",
    "eager_peak_mem", "dynamo_peak_mem", "calls_captured", "unique_graphs", "fallbacks_to_eager",
    "graph_breaks", "unique_graph_breaks", "autograd_captures", "autograd_compiles",
)
EXTRA_COLUMNS = ("backend", "mode", "status", "iterations_per_run", "spread")
CSV_COLUMNS = HARNESS_COLUMNS + EXTRA_COLUMNS

# Column titles of the seed's table (pytorch PR #88449) for the backends it had; others: their name.
SEED_LABELS = {"trace_once": "XLA (trace once)", "trace_everytime": "XLA (trace everytime)"}
MISSING = "-"  # a cell with no record at all

ENV_DISTRIBUTIONS = ("torch", "torch_xla", "torchvision", "pytest", "pytest-xla-dynamo")


# --- small helpers -----------------------------------------------------------------------------------


def _ordered(values: Iterable[str]) -> list[str]:
    """Distinct values in first-seen order."""
    return list(dict.fromkeys(values))


def _sig3(value: float) -> str:
    """``value`` with 3 significant digits, trailing zeros kept (``1.50``, ``12.3``, ``123``)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:.2f}"
    text = f"{value:#.3g}"
    if "e" in text:
        return f"{value:.0f}" if abs(value) >= 1 else f"{value:.3g}"
    return text.rstrip(".")


def format_speedup(value: float) -> str:
    """A speedup as the tables show it: ``1.23x``."""
    return _sig3(value) + "x"


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean of the positive values (None when there are none)."""
    good = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return statistics.geometric_mean(good) if good else None


def record_speedup(record: CaseRecord) -> float | None:
    """The record's speedup, or baseline latency / backend latency when only those were stored."""
    if record.speedup is not None:
        return record.speedup
    if record.baseline_latency and record.abs_latency:
        return record.baseline_latency / record.abs_latency
    return None


def _extra_or_field(record: CaseRecord, name: str) -> Any:
    value = getattr(record, name, None)
    return record.extra.get(name) if value in (None, "") else value


def _latest(records: Iterable[CaseRecord]) -> dict[tuple[str, str, str], CaseRecord]:
    """One record per (model, backend, mode): the last one stored wins."""
    out: dict[tuple[str, str, str], CaseRecord] = {}
    for record in records:
        out[record.key] = record
    return out


def _joined(values: Iterable[Any], fallback: Any) -> str:
    distinct = _ordered(str(v) for v in values if v not in (None, ""))
    if not distinct:
        return "?" if fallback in (None, "") else str(fallback)
    return ",".join(distinct)


def _grid(headers: Sequence[str], rows: list[list[str]]) -> str:
    from tabulate import tabulate

    return tabulate(rows, headers=list(headers), tablefmt="grid", disable_numparse=True,
                    colalign=("left",) + ("right",) * (len(headers) - 1))


# --- tables ------------------------------------------------------------------------------------------


def timing_modes(records: Iterable[CaseRecord]) -> list[str]:
    """The modes that have timing records: train and infer first, in that order, then any other."""
    seen = _ordered(r.mode for r in records if r.suite == TIMING_SUITE)
    return [m for m in MODES if m in seen] + [m for m in seen if m not in MODES]


def speedup_table(records: Iterable[CaseRecord], mode: str, *, baseline: str | None = None,
                  iterations_per_run: int | None = None, repeat: int | None = None,
                  latency: bool = False) -> str:
    """The seed's table for ``mode``: a row per model, a column per backend, a final ``geomean`` row.

    Only records of suite ``timing`` count; the baseline backend's own records are not a column.
    A cell is the speedup (``1.23x``; with ``latency``, also the backend's median ms per iteration), the
    record's status when it has no speedup (``fail_to_run``), or ``-`` when the case has no record. The
    geomean is over the models that have a speedup for that backend, with ``(n/N)`` when some do not.
    The title names the mode, the baseline, iterations per run and repeat (from the records; the
    keyword arguments are the fallback when the records do not say). Empty string: no such records.
    """
    chosen = [r for r in records if r.suite == TIMING_SUITE and r.mode == mode]
    base = _joined((r.baseline for r in chosen), baseline or "eager")
    chosen = [r for r in chosen if r.backend not in (r.baseline or baseline or "eager").split(",")]
    if not chosen:
        return ""
    cells = _latest(chosen)
    models = _ordered(r.name for r in chosen)
    backends = _ordered(r.backend for r in chosen)
    rows: list[list[str]] = []
    speedups: dict[str, list[float]] = {b: [] for b in backends}
    for model in models:
        row = [model]
        for backend in backends:
            record = cells.get((model, backend, mode))
            if record is None:
                row.append(MISSING)
                continue
            value = record_speedup(record)
            if value is None:
                row.append(record.status)
                continue
            speedups[backend].append(value)
            text = format_speedup(value)
            if latency and record.abs_latency is not None:
                text += f" ({_sig3(record.abs_latency)} ms)"
            row.append(text)
        rows.append(row)
    mean_row = ["geomean"]
    for backend in backends:
        mean = geomean(speedups[backend])
        if mean is None:
            mean_row.append(MISSING)
            continue
        text = format_speedup(mean)
        if len(speedups[backend]) < len(models):
            text += f" ({len(speedups[backend])}/{len(models)})"
        mean_row.append(text)
    rows.append(mean_row)
    title = (f"{mode}: speedup over {base} (iterations per run: "
             f"{_joined((_extra_or_field(r, 'iterations_per_run') for r in chosen), iterations_per_run)}, "
             f"repeat: {_joined((_extra_or_field(r, 'repeat') for r in chosen), repeat)})")
    return title + "\n" + _grid(["Model"] + [SEED_LABELS.get(b, b) for b in backends], rows)


def speedup_tables(records: Iterable[CaseRecord], **kwargs: Any) -> str:
    """:func:`speedup_table` for every mode with timing records, separated by a blank line."""
    records = list(records)
    tables = [speedup_table(records, mode, **kwargs) for mode in timing_modes(records)]
    return "\n\n".join(t for t in tables if t)


def status_counts(records: Iterable[CaseRecord]) -> dict[str, int]:
    """pass / fail / xfail (a non-passing case with a known issue) / xpass (a passing one) / flaky."""
    counts = {"pass": 0, "fail": 0, "xfail": 0, "xpass": 0, "flaky": 0}
    for record in records:
        passed = record.status in PASSING
        if record.known_issue:
            counts["xpass" if passed else "xfail"] += 1
        else:
            counts["pass" if passed else "fail"] += 1
        counts["flaky"] += bool(record.flaky)
    return counts


def status_table(records: Iterable[CaseRecord]) -> str:
    """Parity results: a row per model, a column per backend x mode, the status in each cell.

    Only records of suite ``parity`` count (the last one per case). A cell with a known issue shows it
    (``fail_accuracy (xfail 4174)``), a flaky case says so, a case without a record is ``-``. A counts
    line follows: ``pass N / fail N / xfail N`` (plus xpass and flaky when there are any).
    Empty string: no parity records.
    """
    chosen = [r for r in records if r.suite == PARITY_SUITE]
    if not chosen:
        return ""
    cells = _latest(chosen)
    models = _ordered(r.name for r in chosen)
    modes = [m for m in MODES if any(r.mode == m for r in chosen)]
    modes += [m for m in _ordered(r.mode for r in chosen) if m not in modes]
    columns = [(b, m) for b in _ordered(r.backend for r in chosen) for m in modes
               if any(r.backend == b and r.mode == m for r in chosen)]
    rows = []
    for model in models:
        row = [model]
        for backend, mode in columns:
            record = cells.get((model, backend, mode))
            if record is None:
                row.append(MISSING)
                continue
            text = record.status
            notes = []
            if record.known_issue:
                notes.append(("xpass " if record.status in PASSING else "xfail ") + record.known_issue)
            if record.flaky:
                notes.append("flaky")
            row.append(text + (f" ({', '.join(notes)})" if notes else ""))
        rows.append(row)
    counts = status_counts(cells.values())
    line = " / ".join(f"{k} {v}" for k, v in counts.items() if k in ("pass", "fail", "xfail") or v)
    return _grid(["Model"] + [f"{b} {m}" for b, m in columns], rows) + "\n" + line


# --- files -------------------------------------------------------------------------------------------


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], binary: bool = False) -> Iterator[IO[Any]]:
    """Write ``path`` through a temporary file in its folder, moved into place only on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; a report is an ordinary file
        f: IO[Any] = open(fd, "wb") if binary else open(fd, "w", encoding="utf-8", newline="")
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6f}"
    return value


def csv_row(record: CaseRecord) -> dict[str, Any]:
    """The CSV row of one record (see the module docstring for what fills each column)."""
    row: dict[str, Any] = {}
    for column in CSV_COLUMNS:
        if column == "fallbacks_to_eager":
            value = record.extra.get(column, record.fallbacks)
        elif column == "speedup":
            value = record_speedup(record)
        else:
            value = _extra_or_field(record, column)
        row[column] = _csv_value(value)
    return row


def write_csv(records: Iterable[CaseRecord], path: str | os.PathLike[str]) -> Path:
    """The harness's performance CSV (:data:`CSV_COLUMNS`), a row per record, written atomically."""
    with atomic_write(path) as f:
        writer = csv.DictWriter(f, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
        writer.writeheader()
        for record in records:
            writer.writerow(csv_row(record))
    return Path(path)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MKL_NUM_THREADS")
"""Environment variables that change CPU timings (eager's OpenMP pool against XLA:CPU's threads)."""


def environment_info(config: pytest.Config | None = None, *, workers: int | None = None) -> dict[str, Any]:
    """Where and how the session ran (no torch import: versions come from the installed metadata).

    ``workers`` is the number of xdist workers that reported; without it, ``-n`` when it is a number.
    """
    xcfg = get_config(config) if config is not None else None
    if workers is None and config is not None:
        numprocesses = getattr(config.option, "numprocesses", None)
        workers = numprocesses if isinstance(numprocesses, int) else 0
    return {
        "versions": {dist: _version(dist) for dist in ENV_DISTRIBUTIONS},
        "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", ""),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "threads": {k: os.environ[k] for k in THREAD_VARIABLES if k in os.environ},
        "seed": xcfg.seed if xcfg else None,
        "iterations_per_run": xcfg.iterations_per_run if xcfg else None,
        "repeat": xcfg.repeat if xcfg else None,
        "baseline_backend": xcfg.baseline_backend if xcfg else None,
        "backends": list(xcfg.backends) if xcfg else None,
        "tier": xcfg.tier if xcfg else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "xdist_workers": workers or 0,
        "argv": list(config.invocation_params.args) if config is not None else list(sys.argv[1:]),
    }


def write_json(records: Iterable[CaseRecord], path: str | os.PathLike[str],
               environment: dict[str, Any] | None = None) -> Path:
    """JSON Lines, as torch_xla's experiment_runner: one record per line, each with the environment."""
    env = environment if environment is not None else environment_info()
    with atomic_write(path) as f:
        for record in records:
            f.write(json.dumps({**record.to_dict(), "environment": env}, sort_keys=False) + "\n")
    return Path(path)


def read_json(path: str | os.PathLike[str]) -> list[CaseRecord]:
    """The records of a :func:`write_json` file (e.g. a stored timing baseline)."""
    with open(path, encoding="utf-8") as f:
        return [CaseRecord.from_dict(json.loads(line)) for line in f if line.strip()]


def write_png(records: Iterable[CaseRecord], path: str | os.PathLike[str],
              environment: dict[str, Any] | None = None, *, baseline: str | None = None) -> Path:
    """Grouped bars of the speedups (a group per model, a bar per backend, a last hatched ``geomean``
    group), one subplot per mode, a line at 1.0, titled with the versions and the date.

    Uses matplotlib's object API on the Agg canvas (no pyplot, so the process's matplotlib backend is
    left alone). ImportError when matplotlib is not installed.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    timing = [r for r in records if r.suite == TIMING_SUITE]
    modes = timing_modes(timing) or ["train"]
    env = environment if environment is not None else environment_info()
    versions = env.get("versions", {})
    base = _joined((r.baseline for r in timing), baseline or "eager")
    chosen = [r for r in timing if r.backend not in (r.baseline or baseline or "eager").split(",")]
    all_models = _ordered(r.name for r in chosen)
    figure = Figure(figsize=(max(8.0, 1.1 * (len(all_models) + 1) + 2), 3.6 * len(modes) + 0.6),
                    layout="constrained")
    FigureCanvasAgg(figure)
    figure.suptitle(f"speedup over {base}\ntorch {versions.get('torch') or '?'}, torch_xla "
                    f"{versions.get('torch_xla') or '?'}, PJRT_DEVICE={env.get('PJRT_DEVICE') or '?'}, "
                    f"{str(env.get('date', ''))[:10]}", fontsize=10)
    axes = figure.subplots(len(modes), 1, squeeze=False)[:, 0]
    for ax, mode in zip(axes, modes, strict=True):
        in_mode = [r for r in chosen if r.mode == mode]
        cells = _latest(in_mode)
        models = _ordered(r.name for r in in_mode)
        backends = _ordered(r.backend for r in in_mode)
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
        its = _joined((_extra_or_field(r, "iterations_per_run") for r in in_mode), env.get("iterations_per_run"))
        ax.set_title(f"{mode} (iterations per run: {its})")
        if backends:
            ax.legend(fontsize=8)
    with atomic_write(path, binary=True) as f:
        figure.savefig(f, format="png", dpi=100)
    return Path(path)


def write_reports(records: Sequence[CaseRecord], formats: Iterable[str], report_dir: str | os.PathLike[str],
                  environment: dict[str, Any], *, baseline: str | None = None) -> tuple[list[str], list[str]]:
    """Write the selected file reports; returns (lines saying what was written, error lines)."""
    lines: list[str] = []
    errors: list[str] = []
    folder = Path(report_dir)
    for fmt in (f for f in FILE_FORMATS if f in formats):
        path = folder / (BASENAME + FILE_SUFFIX[fmt])
        try:
            if fmt == "csv":
                write_csv(records, path)
            elif fmt == "json":
                write_json(records, path, environment)
            else:
                try:
                    import matplotlib  # noqa: F401
                except ImportError:
                    lines.append("png report not written: matplotlib is not installed (pip install matplotlib)")
                    continue
                write_png(records, path, environment, baseline=baseline)
        except Exception as exc:  # reported as an error line and a failing exit status
            errors.append(f"could not write the {fmt} report {path}: {type(exc).__name__}: {exc}")
            continue
        lines.append(f"{fmt} report: {path}")
    return lines, errors


# --- the plugin --------------------------------------------------------------------------------------


class _WorkerCounter:
    """xdist-only hook (registered only when xdist is loaded): records received per worker."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    @pytest.hookimpl
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        text = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
        worker = str(getattr(node, "workerinput", {}).get("workerid") or getattr(node.gateway, "id", "?"))
        self.counts[worker] = len(json.loads(text)) if text else 0


class ReportPlugin:
    """End-of-session reports, on the controller only: files at sessionfinish, tables in the summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.worker_records: dict[str, int] = {}
        self.lines: list[str] = []
        self.errors: list[str] = []
        if not self.is_worker and config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(_WorkerCounter(self.worker_records), "xla_dynamo_report_xdist")

    def _silent(self) -> bool:
        """xdist workers and isolated tests' child sessions report nothing: their records reach the
        session that reports (the controller, the parent) and are reported there."""
        if self.is_worker:
            return True
        from pytest_xla_dynamo.isolation import is_isolated_child

        return is_isolated_child(self.config)

    def _records(self) -> list[CaseRecord]:
        """The session's records in a stable order (under xdist they arrive as workers finish):
        models in zoo order, backends in registry order, then modes; unknown names after, by name."""
        from pytest_xla_dynamo import zoo
        from pytest_xla_dynamo.config import MODES
        from pytest_xla_dynamo.plugin import backend_registry

        models = {name: i for i, name in enumerate(zoo.model_names())}
        backends = {name: i for i, name in enumerate(backend_registry(self.config).names())}

        def key(r: CaseRecord) -> tuple[int, str, int, str, int]:
            return (models.get(r.name, len(models)), r.name, backends.get(r.backend, len(backends)), r.backend,
                    MODES.index(r.mode) if r.mode in MODES else len(MODES))

        return sorted(get_store(self.config), key=key)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self._silent():
            return
        xcfg = get_config(self.config)
        formats = [f for f in xcfg.report if f in FILE_FORMATS]
        if not formats:
            return
        records = self._records()
        if not records:
            self.lines.append(f"no records: no {'/'.join(formats)} report written")
            return
        environment = environment_info(self.config, workers=len(self.worker_records) or None)
        self.lines, self.errors = write_reports(records, formats, xcfg.report_dir, environment,
                                                baseline=xcfg.baseline_backend)
        if self.errors and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if self._silent():
            return
        xcfg = get_config(config)
        records = self._records()
        if not records and not self.lines and not self.errors:
            return
        tr = terminalreporter
        tr.write_sep("=", SECTION)
        line = f"{len(records)} record{'s' if len(records) != 1 else ''}"
        if self.worker_records:
            workers = len(self.worker_records)
            line += (f" from {workers} xdist worker{'s' if workers != 1 else ''} ("
                     + ", ".join(f"{w}: {n}" for w, n in sorted(self.worker_records.items())) + ")")
        tr.write_line(line)
        if "table" in xcfg.report:
            status = status_table(records)
            if status:
                tr.write_line("")
                tr.write_line("parity")
                tr.write_line(status)
            speed = speedup_tables(records, baseline=xcfg.baseline_backend,
                                   iterations_per_run=xcfg.iterations_per_run, repeat=xcfg.repeat)
            if speed:
                tr.write_line("")
                tr.write_line(speed)
        if self.lines or self.errors:
            tr.write_line("")
        for line in self.lines:
            tr.write_line(line)
        for line in self.errors:
            tr.write_line("ERROR: " + line, red=True, bold=True)

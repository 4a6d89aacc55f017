"""The JSON Lines report (one record per line, each with the environment it ran in) and its reader.

As torch_xla's ``experiment_runner``: every line is a whole record (:meth:`CaseRecord.to_json`) plus an
``environment`` object (:func:`environment_info`: versions, PJRT device, thread variables, the timing
options, the CPU and its instruction-set cap, the machine). :func:`read_json` reads such a file back (a
stored timing baseline, a shard merged), strictly: UTF-8 text, one JSON object per line, each field of the
type :class:`CaseRecord` declares (:meth:`CaseRecord.from_json`), a ValueError naming the file and line otherwise.
No torch: versions come from the installed metadata (:func:`pytest_xla_dynamo.versions.installed`).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.fileio import atomic_write, check_nesting, read_text
from pytest_xla_dynamo.records import CaseRecord, RecordError, record_value_problem
from pytest_xla_dynamo.timing.settings import TimingSettings
from pytest_xla_dynamo.timing.threads import budget_environment
from pytest_xla_dynamo.versions import installed
from pytest_xla_dynamo.workers.cpu_isa import isa_environment

ENV_DISTRIBUTIONS = ("torch", "torch_xla", "torchvision", "timm", "transformers", "pytest", "pytest-xla-dynamo")

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MKL_NUM_THREADS", "PJRT_NPROC")
"""Environment variables that change CPU timings (eager's OpenMP pool against XLA:CPU's threads)."""


def environment_info(xcfg: XlaConfig | None = None, timing: TimingSettings | None = None, *,
                     argv: Sequence[str] | None = None, workers: int = 0) -> dict[str, Any]:
    """Where and how the session ran: JSON-safe, no torch import.

    ``xcfg`` gives the seed and the cases' options, ``timing`` the timing options (None without a session);
    ``argv`` the session's arguments (default: this process's); ``workers`` the number of xdist workers that
    reported.
    """
    return {
        "versions": {dist: installed(dist) for dist in ENV_DISTRIBUTIONS},
        # unset or empty: the CPU, which the XLA tests' processes default to (an xdist controller sets nothing)
        "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "").strip() or "CPU",
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "threads": {k: os.environ[k] for k in THREAD_VARIABLES if k in os.environ},
        "thread_budget": budget_environment(timing.threads) if timing else None,
        "cpu_isa": isa_environment(xcfg.cpu_isa if xcfg else None),
        "seed": xcfg.seed if xcfg else None,
        "iterations_per_run": timing.iterations_per_run if timing else None,
        "repeat": timing.repeat if timing else None,
        "baseline_backend": timing.baseline_backend if timing else None,
        "backends": list(xcfg.backends) if xcfg else None,
        "tier": xcfg.tier if xcfg else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "xdist_workers": workers or 0,
        "argv": list(argv) if argv is not None else list(sys.argv[1:]),
    }


def write_json(records: Iterable[CaseRecord], path: str | os.PathLike[str],
               environment: dict[str, Any] | None = None) -> Path:
    """JSON Lines, as torch_xla's experiment_runner: one record per line, each with the environment."""
    env = environment if environment is not None else environment_info()
    with atomic_write(path) as f:
        for record in records:
            f.write(json.dumps({**record.to_json(), "environment": env}, sort_keys=False) + "\n")
    return Path(path)


def read_json(path: str | os.PathLike[str]) -> list[CaseRecord]:
    """The records of a :func:`write_json` file (JSON Lines; one JSON array of records is read too),
    e.g. a stored timing baseline. ValueError naming the file and line of a bad one."""
    return read_report(path)[0]


def read_report(path: str | os.PathLike[str]) -> tuple[list[CaseRecord], dict[str, Any]]:
    """:func:`read_json`'s records and the environment the first record was written with (``{}`` if none),
    from one reading of the file."""
    text = read_text(path)  # TextFileError (a ValueError) naming the file: a folder, UTF-16, binary data, too large
    check_nesting(text, str(path), "json")  # before json recurses into it: the line of a level too deep
    items: list[tuple[int, Any]] = []
    if text.lstrip().startswith("["):
        try:
            items = [(1, o) for o in json.loads(text)]
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{err.lineno}: not JSON: {err.msg}") from None
        except TypeError:
            raise ValueError(f"{path}:1: not a JSON array of records") from None
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    items.append((number, json.loads(line)))
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{number}: not a JSON object: {err.msg}") from None
    records = []
    for number, obj in items:
        if not isinstance(obj, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object (a record), got {type(obj).__name__}")
        if problem := record_value_problem(obj):
            raise ValueError(f"{path}:{number}: not a record: {problem}")
        try:
            records.append(CaseRecord.from_json(obj))
        except RecordError as err:
            raise ValueError(f"{path}:{number}: not a record: {err}") from None
        except TypeError as err:
            raise ValueError(f"{path}:{number}: not a record ({err})") from None
    environment = items[0][1].get("environment") or {} if items else {}
    if not isinstance(environment, dict):
        raise ValueError(f"{path}:{items[0][0]}: field 'environment': {json.dumps(environment)[:80]} is not an object")
    environment = dict(environment)
    return records, environment

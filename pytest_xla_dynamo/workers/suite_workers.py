"""How many pytest-xdist workers ``./run.sh suite`` runs: two where the machine has the cores and the memory for
them, else one process; one line says which and why.

    python -m pytest_xla_dynamo.workers.suite_workers [pytest args]

prints that line on stderr and the arguments to add on stdout (``-n 2``, or nothing). The decision, in order:

* arguments that choose themselves win: ``-n``/``--numprocesses``/``--dist`` (xdist's), ``-p no:xdist``;
* ``XLA_SUITE_WORKERS``: ``1`` (one process), ``2`` (two workers), ``auto`` or unset (the rest of this list);
  anything else is an error (exit status 2);
* pytest-xdist not installed, or no machine lock (POSIX ``flock``, :mod:`.machine_lock`: the timed runs need
  the machine to themselves): one process;
* fewer than two usable cores (the CPU affinity): one process;
* less memory available (``MemAvailable`` of ``/proc/meminfo``) than two workers need
  (:data:`TWO_WORKERS_NEED_KB`): one process; ``/proc/meminfo`` unreadable: one process;
* else two workers.

What two workers need is what the plugin measured of its own processes: the main job's peak of all its
processes together under two workers (:data:`MAIN_JOB_TWO_WORKERS_KB`, the JSON report's
``memory.summed_peak_rss_kb``, sampled by :class:`~pytest_xla_dynamo.timing.memory.TreeSampler`) with a
margin. No torch, no pytest-xdist import.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_xla_dynamo.core.machine import available_cores
from pytest_xla_dynamo.workers import machine_lock

ENV = "XLA_SUITE_WORKERS"
CHOICES = ("1", "2", "auto")
#: the main job's (``./run.sh suite``) peak of all its processes together under two workers, in kB, as measured
#: (docs/ci.md#memory); re-measure it when the main job grows
MAIN_JOB_TWO_WORKERS_KB = 7_367_452
#: room above the measured peak: a model's memory differs a little between CPUs and versions, and the page cache
#: and the OS need some
MARGIN = 1.25
TWO_WORKERS_NEED_KB = int(MAIN_JOB_TWO_WORKERS_KB * MARGIN)
PREFIX = "run.sh:"


@dataclass(frozen=True)
class Choice:
    """The workers chosen: the arguments to add (``["-n", "2"]`` or none) and the line saying why."""

    args: list[str]
    line: str


def chosen_by_args(args: Sequence[str]) -> str | None:
    """The argument that already chooses the processes (``-n 3``, ``--dist=load``, ``-p no:xdist``), or None."""
    for i, arg in enumerate(args):
        following = args[i + 1] if i + 1 < len(args) else ""
        if arg in ("-n", "--numprocesses", "--dist", "-d", "--tx"):
            return f"{arg} {following}".strip()
        if arg.startswith(("--numprocesses=", "--dist=", "--tx=")) or (arg.startswith("-n") and arg[2:].isalnum()):
            return arg
        if arg == "-p" and following.replace(" ", "") == "no:xdist":
            return f"-p {following}"
        if arg.startswith("-p") and arg[2:].lstrip("=").replace(" ", "") == "no:xdist":
            return arg
    return None


def mem_available_kb(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """``MemAvailable`` in kB (None where it cannot be read)."""
    try:
        for line in meminfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key == "MemAvailable":
                return int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return None


def xdist_installed() -> bool:
    return importlib.util.find_spec("xdist") is not None


def _gb(kb: int) -> str:
    return f"{kb / 1e6:.1f} GB"


ONE = "one process"
TWO = "two pytest-xdist workers"


def decide(args: Sequence[str], env: Mapping[str, str], *, cores: int, available_kb: int | None, xdist: bool,
           lock: bool) -> Choice:
    """The workers for ``args`` (see the module docstring). ValueError: a bad :data:`ENV` value."""
    given = chosen_by_args(args)
    if given is not None:
        return Choice([], f"{PREFIX} the arguments choose the processes ({given})")
    value = env.get(ENV, "").strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(f"{PREFIX} {ENV}={env.get(ENV)!r}: expected one of {', '.join(CHOICES)}")
    if value == "1":
        return Choice([], f"{PREFIX} {ONE} ({ENV}=1)")
    if value == "2":
        return Choice(["-n", "2"], f"{PREFIX} {TWO} ({ENV}=2)")
    need = (f"two workers need {_gb(TWO_WORKERS_NEED_KB)}: the main job's measured peak of all its processes, "
            f"{_gb(MAIN_JOB_TWO_WORKERS_KB)}, x {MARGIN}")
    why = ("pytest-xdist is not installed" if not xdist
           else "no machine lock (POSIX flock) to give the timed runs the cores alone" if not lock
           else f"{cores} usable core" + ("s" if cores != 1 else "") if cores < 2
           else "MemAvailable unreadable (/proc/meminfo)" if available_kb is None
           else f"{_gb(available_kb)} available, {need}" if available_kb < TWO_WORKERS_NEED_KB
           else "")
    if why:
        return Choice([], f"{PREFIX} {ONE} ({why}; {ENV}=2 to force two workers)")
    return Choice(["-n", "2"], f"{PREFIX} {TWO} ({cores} usable cores; {_gb(available_kb or 0)} available, {need}; "
                  f"{ENV}=1 for one process)")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        choice = decide(args, os.environ, cores=available_cores(), available_kb=mem_available_kb(),
                        xdist=xdist_installed(), lock=machine_lock.available())
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(choice.line, file=sys.stderr)
    print(" ".join(choice.args))
    return 0


if __name__ == "__main__":
    sys.exit(main())

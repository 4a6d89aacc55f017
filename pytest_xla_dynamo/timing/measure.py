"""The timed runs: N iterations per run, one device wait per run, baseline and backend interleaved.

One *timed run* is ``--xla-iterations-per-run`` N iterations of :meth:`PreparedCase.step` (each ending
in ``torch_xla.sync()``) followed by one ``xm.wait_device_ops()``, so tracing of step i+1 overlaps the
execution of step i, as in the seed (pytorch PR #88449) and pytorch's ``benchmarks/dynamo`` ``timed()``.
Before the first timed run both cases are reset to their initial weights, synced and waited on.
``--xla-repeat`` R runs of the baseline and of the backend interleave, baseline first, so that machine
drift cancels (pytest-benchmark's ``pedantic`` with the baseline run as its untimed ``setup``).
Each run records its wall time (``perf_counter``), the process's CPU time (``process_time``: all of
its threads, XLA:CPU's included) and the whole machine's busy CPU time (``/proc/stat``), so that the CPU
other processes took during the run is known; the 1-minute load average is read before and after the runs,
for :mod:`~pytest_xla_dynamo.timing.interference`. With ``xla_min_run_time`` the untimed prime step of
each side is timed too, and N grows so that each run lasts at least that long, the same N for both sides
(:mod:`~pytest_xla_dynamo.timing.calibrate`). With ``xla_placements`` ``step`` or ``run`` a side on the CPU
draws where its memory lands anew, untimed, before each of its timed steps or runs, and takes one untimed step
after each draw (:mod:`~pytest_xla_dynamo.timing.placement`; ``fresh`` is the session's, set before any model
is built: :mod:`pytest_xla_dynamo.timing.plugin`).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.timing import interference
from pytest_xla_dynamo.timing.calibrate import calibrated_iterations, step_estimate
from pytest_xla_dynamo.timing.interference import FOREIGN_CORES
from pytest_xla_dynamo.timing.placement import Placement
from pytest_xla_dynamo.timing.stats import Figures

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.cases import PreparedCase


def run_iterations(case: PreparedCase, iterations: int) -> None:
    """One timed run's work: ``iterations`` steps (each ends in the backend's sync), then one wait."""
    case.phase, case.step_index = "timing", None  # named in a failure's stage
    for _ in range(iterations):
        case.step()
    case.backend.wait()


@dataclass(frozen=True)
class RunTime:
    """One timed run: wall seconds, the process's CPU seconds, and the whole machine's busy CPU seconds
    (every process, all cores; None where the platform does not say)."""

    wall: float
    cpu: float
    machine: float | None = None
    major_faults: int | None = None  # the process's major page faults during the run (None: not counted)


def machine_busy() -> float | None:
    """The machine's busy CPU seconds so far, all cores together (Linux ``/proc/stat``: user, nice, system,
    irq, softirq and steal ticks); None where it cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
        ticks = [int(v) for v in fields[1:9]]
        user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux, or an unexpected format
        return None


SETTLE_WINDOW = 0.2
"""Seconds of one look at the other processes' CPU in :func:`settle` (``/proc/stat`` counts 10 ms ticks)."""
SETTLE_LIMIT = 3.0
"""At most this long :func:`settle` waits for the other processes to go quiet."""


def settle(quiet_cores: float = FOREIGN_CORES, window: float = SETTLE_WINDOW, limit: float = SETTLE_LIMIT) -> float:
    """Wait until the other processes use at most ``quiet_cores`` cores over a ``window`` (at most ``limit``
    seconds); the seconds waited. Called once the machine lock of several xdist workers is held exclusive: the
    other workers stop at their next test, but the end of their last one (its report sent to the controller,
    its model freed) can still run beside the first timed runs. No wait where ``/proc/stat`` cannot be read."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        machine, cpu, begin = machine_busy(), time.process_time(), time.perf_counter()
        if machine is None:
            break
        time.sleep(window)
        after = machine_busy()
        others = (after or machine) - machine - (time.process_time() - cpu)
        if others / (time.perf_counter() - begin) <= quiet_cores:
            break
    return time.perf_counter() - start


def major_faults() -> int | None:
    """The process's major page faults so far (a page read back from disk); None where ``resource`` is missing."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt


def _clocked(work: Callable[[], None]) -> RunTime:
    """Wall, process CPU and machine busy seconds, and the major page faults, of ``work()``."""
    faults = major_faults()
    machine = machine_busy()
    cpu = time.process_time()
    start = time.perf_counter()
    work()
    wall = time.perf_counter() - start
    own = time.process_time() - cpu
    after = machine_busy()
    faulted = major_faults()
    return RunTime(wall, own, None if machine is None or after is None else after - machine,
                   None if faults is None or faulted is None else faulted - faults)


def _plus(a: RunTime, b: RunTime) -> RunTime:
    return RunTime(a.wall + b.wall, a.cpu + b.cpu,
                   None if a.machine is None or b.machine is None else a.machine + b.machine,
                   None if a.major_faults is None or b.major_faults is None else a.major_faults + b.major_faults)


def timed_run(case: PreparedCase, iterations: int, before_step: Callable[[], None] | None = None) -> RunTime:
    """Wall, process CPU and machine busy seconds, and the major page faults, of one :func:`run_iterations`.

    ``before_step`` (``xla_placements=step``, a side on the CPU): called, untimed, before every step; the run's
    figures are then the sums of its steps' (each step with its wait)."""
    if before_step is None:
        run = _clocked(lambda: run_iterations(case, iterations))
    else:
        run = RunTime(0.0, 0.0, 0.0, 0)
        for _ in range(iterations):
            before_step()
            run = _plus(run, _clocked(lambda: run_iterations(case, 1)))
    case.drop_grads()  # untimed: the other case steps next, beside this one's weights only
    return run


Pedantic = Callable[..., Any]


def interleaved(target: Callable[[], None], setup: Callable[[], None], rounds: int) -> None:
    """pytest-benchmark's ``pedantic(target, setup=setup, rounds=R, iterations=1)`` without it."""
    for _ in range(rounds):
        setup()
        target()


@dataclass
class Side:
    """One side's timed runs, the baseline's or the backend's: per run its wall and CPU seconds, the machine's busy
    CPU seconds (all processes; None where not read) and the process's major page faults (None where not read)."""

    runs: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    machine: list[float | None] = field(default_factory=list)
    faults: list[int | None] = field(default_factory=list)

    def add(self, run: RunTime) -> None:
        """Keep one run."""
        self.runs.append(run.wall)
        self.cpu.append(run.cpu)
        self.machine.append(run.machine)
        self.faults.append(run.major_faults)

    def keep(self, count: int) -> None:
        """Keep the first ``count`` runs (pytest-benchmark may call the target again after its rounds)."""
        for values in (self.runs, self.cpu, self.machine, self.faults):
            del values[count:]

    def frozen(self, label: str, host_bound: bool) -> interference.Runs:
        """The runs as the interference rules read them."""
        return interference.Runs(label, tuple(self.runs), tuple(self.cpu), host_bound, tuple(self.machine))


@dataclass
class Measurement:
    """The raw result of :func:`measure`: each side's timed runs, the XLA compiles during them, and the load average
    before and after them."""

    baseline: Side = field(default_factory=Side)
    backend: Side = field(default_factory=Side)
    recompiles: int = 0
    iterations_per_run: int = 1  # the runs' iterations: calibrated (xla_min_run_time) when it asked for more
    requested_iterations: int = 1  # --xla-iterations-per-run
    min_run_time: float = 0.0  # xla_min_run_time (0: not calibrated)
    step_estimate: float | None = None  # seconds per step the calibration used (the faster side's)
    placements: str = "once"  # xla_placements
    redraws: dict[str, int] = field(default_factory=dict)  # per side on the CPU: placements drawn (xla_placements)
    cpus: tuple[int, ...] = ()  # the CPUs every thread was pinned to during the runs (xla_timing_cpus; (): not)
    load_before: float | None = None
    load_after: float | None = None

    @property
    def figures(self) -> Figures:
        return Figures.from_runs(self.backend.runs, self.baseline.runs, self.iterations_per_run)

    @property
    def load(self) -> float | None:
        """The higher of the load averages read before and after the runs (None where there is none)."""
        loads = [x for x in (self.load_before, self.load_after) if x is not None]
        return max(loads) if loads else None

    def side(self, name: str) -> Side:
        """The side called ``name`` ("baseline" or "backend")."""
        return self.baseline if name == "baseline" else self.backend


def measure(case: PreparedCase, baseline: PreparedCase, iterations: int, repeat: int,
            pedantic: Pedantic | None = None, prime: bool = True, min_run_time: float = 0.0,
            placements: str = "once") -> Measurement:
    """Time ``repeat`` interleaved runs of ``baseline`` then ``case``, ``iterations`` steps each (more with
    ``min_run_time`` > 0 and ``prime``: enough for each run to last that long, the same for both cases).

    ``pedantic`` is ``benchmark.pedantic`` (it times the backend's runs for pytest-benchmark; the
    baseline's run is its ``setup``); None runs the same interleaving directly. Both cases must be
    warmed up: compilation is not part of what is timed here. ``placements`` "step" or "run": before each timed
    step or run a side on the CPU is given a new placement and one untimed step
    (:mod:`~pytest_xla_dynamo.timing.placement`); "once" and "fresh" (the session fixed malloc's pages before
    the models were built): none, only recorded.
    """
    from pytest_xla_dynamo.core import metrics

    result = Measurement(iterations_per_run=iterations, requested_iterations=iterations, min_run_time=min_run_time,
                         placements=placements)
    draws = _Draws(placements, {"baseline": baseline, "backend": case})
    untimed = _prime(baseline, case, prime)
    if prime and min_run_time > 0:
        result.step_estimate = step_estimate(*untimed)
        iterations = result.iterations_per_run = calibrated_iterations(iterations, min_run_time, result.step_estimate)
    before = metrics.snapshot()
    result.load_before = loadavg()

    base_step, case_step = draws.before_step("baseline"), draws.before_step("backend")

    def baseline_run() -> None:  # pytest-benchmark's untimed setup: the backend's draw per run is done here too
        draws.before_run()
        result.baseline.add(timed_run(baseline, iterations, base_step))

    def backend_run() -> None:
        result.backend.add(timed_run(case, iterations, case_step))

    if pedantic is None:
        interleaved(backend_run, baseline_run, repeat)
    else:
        pedantic(target=backend_run, setup=baseline_run, rounds=repeat, iterations=1, warmup_rounds=0)
    result.load_after = loadavg()
    result.redraws = draws.finish()
    after = metrics.snapshot().delta(before)
    result.recompiles = after.compiles
    # pytest-benchmark may call the target again after the rounds (--benchmark-cprofile): not timed runs
    result.baseline.keep(repeat)
    result.backend.keep(repeat)
    return result


def _prime(baseline: PreparedCase, case: PreparedCase, prime: bool) -> list[list[float | None]]:
    """Reset both cases to their initial weights and, with ``prime``, step each once, untimed but clocked: per side
    that step's seconds and its last warm-up step's (the calibration's input)."""
    untimed: list[list[float | None]] = []
    for c in (baseline, case):
        c.reset()  # initial weights, then sync
        if prime:
            start = time.perf_counter()
            run_iterations(c, 1)  # untimed: wakes the thread pools (the warm-up may be long past)
            primed = time.perf_counter() - start
            c.drop_grads()
            warmup = getattr(c, "warmup", None)
            warm = warmup.step_seconds[1:] if warmup is not None else []  # the first step compiled
            untimed.append([primed, *warm[-1:]])
        c.backend.sync()
        c.backend.wait()  # before the first timed run: nothing pending on the device
    return untimed


REDRAWN = ("step", "run")  # the xla_placements values that redraw (the others: "once", "fresh")


class _Draws:
    """``xla_placements``: a :class:`~pytest_xla_dynamo.timing.placement.Placement` per side on the CPU, drawn
    before each timed step ("step") or run ("run") of the side, or never ("once", "fresh")."""

    def __init__(self, when: str, sides: dict[str, PreparedCase]) -> None:
        self.when = when
        self.sides = {side: (Placement(), c) for side, c in sides.items()
                      if when in REDRAWN and getattr(getattr(c, "device", None), "type", None) == "cpu"}

    def _draw(self, side: str) -> None:
        """A new placement for the side, then one untimed step: the first step after a draw grows the heap anew."""
        placement, case = self.sides[side]
        case.inputs = placement.redraw(case.model, case.inputs)
        run_iterations(case, 1)
        case.drop_grads()

    def before_step(self, side: str) -> Callable[[], None] | None:
        """What to call before each timed step of ``side`` (None: nothing)."""
        return functools.partial(self._draw, side) if self.when == "step" and side in self.sides else None

    def before_run(self) -> None:
        """Before each pair of timed runs ("run"): every side's draw."""
        if self.when == "run":
            for side in self.sides:
                self._draw(side)

    def finish(self) -> dict[str, int]:
        """The draws per side; the spacers let go."""
        counts = {side: placement.redraws for side, (placement, _) in self.sides.items()}
        for placement, _ in self.sides.values():
            placement.release()
        return counts


def loadavg() -> float | None:
    """The machine's 1-minute load average (None where the platform has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # not on every platform
        return None

"""The instruction set CPU kernels may use (``--xla-cpu-isa``): a parity verdict can depend on it.

Three libraries pick their code by the CPU's instruction set: oneDNN (CPU eager's convolutions, and
XLA:CPU's, which calls its own copy), ATen's vectorized kernels, and XLA:CPU's code generator. On x86
an AVX-512 machine and an AVX2 machine sum in different orders, so a tensor within rounding of a
threshold lands differently, and XLA:CPU's AVX-512 code is further from fp64 than its AVX2 code. For
most models that changes nothing; for the ill-conditioned ones it changes which tensor diverges
first (docs/zoo.md, "The CPU's instruction set"). The committed expected results and known-issue entries
were recorded with AVX2 kernels, so the default caps all three at AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2``,
``ATEN_CPU_CAPABILITY=avx2``, ``XLA_FLAGS=--xla_cpu_max_isa=AVX2``). That removes the instruction set from the
verdicts, not every difference between machines.

Each is read once, when its library first dispatches a kernel or the XLA runtime starts. The cap is for
the plugin's XLA tests: a session that selects none is left on the kernels it would have without the
plugin. Where collection selected an XLA test, the plugin sets them once collection is over, before any
test runs, in each process that runs one (an xdist worker, an isolated child; a child inherits them too);
the line after "collected N items" says what was set. Where the environment already has one of them
with another value (compared without regard to case), it chose itself: with the default nothing is set
(that line says so); an explicit ``--xla-cpu-isa`` that contradicts it is a usage error. A cap that comes
too late (torch already chose its kernels in this process, e.g. a ``conftest.py`` ran a torch op, or the
XLA runtime is up) is a remark with the default and a usage error when asked for explicitly.
``native`` sets nothing (what timing on the machine's fastest kernels wants). Off x86 nothing is set.
:func:`kernel_setting` names what the XLA tests run with, for the reports and the expected-results
file. No torch here.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo.config import CPU_ISAS, ISA_VARIABLES, NATIVE, XLA_ISA_FLAG
from pytest_xla_dynamo.core import devices
from pytest_xla_dynamo.options import OPTIONS_BY_DEST
from pytest_xla_dynamo.versions import cpu_description as cpu_description

if TYPE_CHECKING:
    from pytest_xla_dynamo.session import XlaSession

UNCAPPED = "uncapped"  # the kernel setting where none of SETTINGS is set
DEFAULT_CPU_ISA = "avx2"
SETTINGS = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", XLA_ISA_FLAG)  # what a cap sets
VARIABLES = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "XLA_FLAGS")  # the environment variables they live in
X86 = ("x86_64", "amd64", "i686", "i386")


def is_x86(machine: str | None = None) -> bool:
    return (machine if machine is not None else platform.machine()).lower() in X86


def current(name: str, environ: Mapping[str, str]) -> str | None:
    """The environment's value of a variable, or of an ``XLA_FLAGS`` entry (``--xla_cpu_max_isa``)."""
    if not name.startswith("--"):
        return environ.get(name)
    found = None
    for entry in environ.get("XLA_FLAGS", "").split():
        key, _, value = entry.partition("=")
        if key == name:
            found = value
    return found


def _set(name: str, value: str, environ: MutableMapping[str, str]) -> None:
    if name.startswith("--"):
        environ["XLA_FLAGS"] = " ".join([*environ.get("XLA_FLAGS", "").split(), f"{name}={value}"])
    else:
        environ[name] = value


def conflicts(isa: str, environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """``{setting: (wanted, found)}`` for each setting of ``isa`` the environment has with another value."""
    found = {name: (want, current(name, environ)) for name, want in ISA_VARIABLES[isa].items()}
    return {name: (want, have) for name, (want, have) in found.items()
            if have is not None and have.strip().lower() != want.lower()}


def apply_isa(isa: str, *, explicit: bool, label: str = "--xla-cpu-isa",
              environ: MutableMapping[str, str] | None = None, machine: str | None = None) -> str:
    """Set the variables of ``isa`` where the environment does not already; returns what was done (for the
    report header). ``explicit``: the option was given (not its default), so a contradicting variable is a
    :class:`pytest.UsageError` naming both."""
    env = os.environ if environ is None else environ
    if isa == NATIVE:
        return "native (no cap set)"
    if not is_x86(machine):
        return f"not set: {machine or platform.machine()} is no x86 machine"
    found = conflicts(isa, env)
    listed = ", ".join(f"{name}={have}" for name, (_, have) in found.items())
    if found and explicit:
        wanted = ", ".join(f"{name}={want}" for name, (want, _) in found.items())
        raise pytest.UsageError(
            f"{label}={isa} sets {wanted}, but the environment has {listed}; unset it, or pass "
            f"--xla-cpu-isa=native to keep the environment's (valid: {', '.join(CPU_ISAS)})")
    if found:  # the environment chose an instruction set itself: no mix of its choice and the default
        return f"not set: the environment's {listed} kept ({isa} is the default)"
    for name, want in ISA_VARIABLES[isa].items():
        if current(name, env) is None:
            _set(name, want, env)
    return ", ".join(f"{name}={want}" for name, want in ISA_VARIABLES[isa].items())


def effective_settings(isa: str | None, environ: Mapping[str, str] | None = None,
                       machine: str | None = None) -> dict[str, str | None]:
    """The settings as the session's XLA tests have them: the environment's, with the cap of ``isa`` applied
    where the plugin applies it (on a copy: the same in the process that applied it, in the xdist controller
    whose workers did, and before it is applied). ``isa`` None: the environment's only."""
    env = dict(os.environ if environ is None else environ)
    if isa is not None:
        apply_isa(isa, explicit=False, environ=env, machine=machine)
    return {name: current(name, env) for name in SETTINGS}


def kernel_setting(isa: str | None, environ: Mapping[str, str] | None = None, machine: str | None = None) -> str:
    """The kernel setting of the session's XLA tests as one line (the expected-results file records it):
    ``ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, --xla_cpu_max_isa=AVX2``, or ``uncapped``."""
    settings = effective_settings(isa, environ, machine)
    return ", ".join(f"{name}={value}" for name, value in settings.items() if value is not None) or UNCAPPED


def same_setting(a: str, b: str) -> bool:
    """Whether two :func:`kernel_setting` lines name the same setting (case and order aside)."""
    def parts(line: str) -> set[str]:
        return {p.strip().lower() for p in line.split(",") if p.strip()}
    return parts(a) == parts(b)


def cpu_line(cpu: Mapping[str, Any] | None = None) -> str:
    """The CPU as one line: its model and its vector flags."""
    cpu = cpu_description() if cpu is None else cpu
    return f"{cpu['model']}; {' '.join(cpu['flags']) or 'no vector flags read'}"


def isa_environment(isa: str | None) -> dict[str, Any]:
    """The CPU part of a report's environment: the option, the settings as the session's XLA tests have them
    (:func:`effective_settings`), the CPU."""
    return {"choice": isa, **effective_settings(isa), "cpu": cpu_description()}


def too_late(isa: str) -> str:
    """Why the cap cannot hold in this process, if it cannot: torch already dispatched ATen kernels at
    another capability, or the XLA runtime already started (checked without importing torch)."""
    wanted = ISA_VARIABLES[isa].get("ATEN_CPU_CAPABILITY")
    problems = []
    torch = sys.modules.get("torch")
    had = os.environ.get("ATEN_CPU_CAPABILITY")
    if wanted and torch is not None and (had or wanted).lower() == wanted:
        if had is None:  # not applied in this process (an xdist controller): what ATen has not chosen yet, it
            os.environ["ATEN_CPU_CAPABILITY"] = wanted  # would choose as the workers do
        try:
            have = str(torch.backends.cpu.get_cpu_capability()).lower()
        finally:
            if had is None:
                os.environ.pop("ATEN_CPU_CAPABILITY", None)
        if have != wanted:
            problems.append(f"torch already chose {have} kernels in this process")
    if wanted and devices.runtime_up():
        problems.append("the XLA runtime was already up")
    return "; ".join(problems)


class CpuIsaPlugin:
    """Sets the session's instruction-set cap once collection selected an XLA test (``plugin.py`` calls
    :meth:`apply` from its ``pytest_collection_finish``, before any test runs and before the terminal shows
    the line after collection) and restores the variables at unconfigure; a session without XLA tests is
    left as it is."""

    def __init__(self, session: XlaSession) -> None:
        self.session = session
        self.isa = session.xcfg.cpu_isa
        source = session.xcfg.sources.get("xla_cpu_isa", "default")
        self.explicit = source != "default"
        self.label = replace(OPTIONS_BY_DEST["xla_cpu_isa"], source=source).label
        self._saved: dict[str, str | None] | None = None
        self.applied: str | None = None  # what was set, once applied in this process
        if self.explicit:  # a contradiction with the environment is a usage error at once, XLA tests or not
            apply_isa(self.isa, explicit=True, label=self.label, environ=dict(os.environ))
        if self.explicit and getattr(session.config.option, "numprocesses", None) and not session.is_worker:
            late = too_late(self.isa)  # the controller's conftest ran what each worker's will: say it once here
            if late:
                raise self._late_error(late)

    def apply(self) -> str:
        """Set the cap now (idempotent): a :class:`pytest.UsageError` where an explicit choice contradicts
        the environment or comes too late for this process."""
        if self.applied is None:
            self._saved = {var: os.environ.get(var) for var in VARIABLES}
            self.applied = apply_isa(self.isa, explicit=self.explicit, label=self.label)
            late = too_late(self.isa)
            if late and self.explicit:
                raise self._late_error(late)
            if late:
                self.applied += f" ({late}; {self.isa} is the default)"
        return self.applied

    def _late_error(self, late: str) -> pytest.UsageError:
        return pytest.UsageError(
            f"{self.label}={self.isa} cannot take effect: {late}, so its XLA tests would run on other "
            f"kernels than asked. Something ran torch before the tests (a conftest.py or a plugin at "
            f"import or collection time): move that into a fixture or a test, or pass "
            f"--xla-cpu-isa=native to run on the kernels torch chose (valid: {', '.join(CPU_ISAS)})")

    def pytest_report_header(self, config: pytest.Config) -> str | None:
        """The xdist controller runs no test: it says what its workers set where they run XLA tests."""
        if not getattr(config.option, "numprocesses", None) or self.session.is_worker:
            return None
        return f"xla-dynamo cpu isa: {kernel_setting(self.isa)} ({cpu_line()}) in the workers that run XLA tests"

    def pytest_report_collectionfinish(self, config: pytest.Config) -> str | None:
        if self.applied is None:
            return None
        return f"xla-dynamo cpu isa: {self.applied} ({cpu_line()})"

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        for var, value in (self._saved or {}).items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value

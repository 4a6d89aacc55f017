"""Repro commands: the one command line that reruns a single case with the options that shaped it."""

from __future__ import annotations

import shlex

from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.core.machine import cpu_list
from pytest_xla_dynamo.options import DEFAULT_MIN_RUN_TIME, DEFAULT_SEED, OPTIONS_BY_DEST


def _arg(dest: str, value: object = None) -> list[str]:
    """The option ``dest`` given ``value`` (None: a flag, on): ``--xla-<name>=VALUE``, or for a lab setting (no
    flag) ``-o xla_<name>=VALUE``."""
    opt = OPTIONS_BY_DEST[dest]
    if opt.on_cli:
        return [opt.cli if value is None else f"{opt.cli}={value}"]
    return ["-o", f"{dest}={'true' if value is None else value}"]


def repro_command(nodeid: str, xcfg: XlaConfig, backend: str, *, timing: bool = False,
                  registry_off: bool = False, prefix: str = "pytest") -> str:
    """A command that reproduces just this case.

    ``timing``: add the timing options (and ``-p no:xdist``); ``registry_off``: add
    ``--xla-known-issues=run`` so that a case the registry xfails shows its raw failure; ``prefix``:
    ``pytest`` or ``python -m pytest_xla_dynamo``.
    """
    args = [nodeid, f"--xla-backend={backend}", f"--xla-tier={xcfg.tier}"]
    if xcfg.seed != DEFAULT_SEED:
        args.append(f"--xla-seed={xcfg.seed}")
    if xcfg.steps != 2:
        args.append(f"--xla-steps={xcfg.steps}")
    if xcfg.dropout != "identity":
        args += _arg("xla_dropout", xcfg.dropout)
    if xcfg.randomize_input:
        args += _arg("xla_randomize_input")
    if xcfg.tolerance is not None:
        args.append(f"--xla-tolerance={xcfg.tolerance:g}")
    if xcfg.patches:
        args.append(f"--xla-patch={','.join(xcfg.patches)}")
    if registry_off:
        args.append("--xla-known-issues=run")
    if timing:
        args += [f"--xla-iterations-per-run={xcfg.iterations_per_run}", f"--xla-repeat={xcfg.repeat}"]
        if xcfg.min_run_time != DEFAULT_MIN_RUN_TIME:
            args += _arg("xla_min_run_time", f"{xcfg.min_run_time:g}")
        if xcfg.placements != "once":
            args += _arg("xla_placements", xcfg.placements)
        if xcfg.timing_cpus:
            args += _arg("xla_timing_cpus", cpu_list(xcfg.timing_cpus))
        if xcfg.timing_processes != 1:
            args.append(f"--xla-timing-processes={xcfg.timing_processes}")
        if xcfg.timing_base_python:
            args.append(f"--xla-timing-base-python={shlex.join(xcfg.timing_base_python)}")
        if not xcfg.baseline_auto:
            args += _arg("xla_baseline_backend", xcfg.baseline_backend)
        if xcfg.threads is not None:
            args += _arg("xla_threads", xcfg.threads)
        args += ["-p", "no:xdist"]
    return prefix + " " + shlex.join(args)


def nodeid_command(nodeid: str, backend: str, prefix: str = "pytest") -> str:
    """The plainest repro: the node id and its backend (for records that carry no command)."""
    return prefix + " " + shlex.join([nodeid, f"--xla-backend={backend}"])


def with_prefix(repro: str, prefix: str) -> str:
    """Rewrite a ``pytest ...`` repro for a session launched another way (``python -m pytest_xla_dynamo``)."""
    if repro and prefix != "pytest" and repro.startswith("pytest "):
        return prefix + repro[len("pytest"):]
    return repro

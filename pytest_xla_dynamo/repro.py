"""Repro commands: the one command line that reruns a single case with the options that shaped it."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.options import DEFAULT_SEED, OPTIONS_BY_DEST


def _arg(dest: str, value: object = None) -> list[str]:
    """The option ``dest`` given ``value`` (None: a flag, on), as :meth:`~pytest_xla_dynamo.options.Option.arg`."""
    return OPTIONS_BY_DEST[dest].arg(None if value is None else str(value))


def repro_command(nodeid: str, xcfg: XlaConfig, backend: str, *, timing: Sequence[str] | None = None,
                  registry_off: bool = False, prefix: str = "pytest") -> str:
    """A command that reproduces just this case.

    ``timing``: a timing case's options (the timing wing's ``TimingSettings.repro_args()``), added with
    ``-p no:xdist``; ``registry_off``: add ``--xla-known-issues=run`` so that a case the registry xfails
    shows its raw failure; ``prefix``: ``pytest`` or ``python -m pytest_xla_dynamo``.
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
    if timing is not None:
        args += [*timing, "-p", "no:xdist"]
    return prefix + " " + shlex.join(args)


def nodeid_command(nodeid: str, backend: str, prefix: str = "pytest") -> str:
    """The plainest repro: the node id and its backend (for records that carry no command)."""
    return prefix + " " + shlex.join([nodeid, f"--xla-backend={backend}"])


def with_prefix(repro: str, prefix: str) -> str:
    """Rewrite a ``pytest ...`` repro for a session launched another way (``python -m pytest_xla_dynamo``)."""
    if repro and prefix != "pytest" and repro.startswith("pytest "):
        return prefix + repro[len("pytest"):]
    return repro

"""The ops under test: torch's OpInfo database as ids and directions, the smoke set, and ``--xla-ops`` selection.

An op's id is its OpInfo name, with its variant after a dot where it has one (``nn.functional.elu``,
``max.reduction_with_dim``). The catalog (:class:`OpCatalog`: each id and whether it is :func:`differentiable`) is
read from ``op_db`` in a child interpreter (:func:`load_catalog` runs this module), so that collecting the op suite
imports no torch in pytest's own process; that needs the ``expecttest`` package, as torch's own tests do.
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

DIRECTIONS = ("forward", "backward")
#: the ops of the main job's smoke set: a unary op, one with the known ELU backward bug, a reduction, a
#: matmul, a pooling op, a random op and an integer op (about a minute on both directions)
SMOKE = ("add", "nn.functional.elu", "sum", "matmul", "nn.functional.max_pool2d", "nn.functional.dropout",
         "argmax")
NONE, ALL, SMOKE_NAME = "none", "all", "smoke"
VALID = (f"'{NONE}', '{SMOKE_NAME}' (default), '{ALL}' (alone; in a list it is the op torch.all), or a comma list of "
         "op ids or globs (e.g. nn.functional.*)")

class CatalogError(RuntimeError):
    """The op database could not be read (the message says why and what to install)."""


@dataclass(frozen=True)
class OpCatalog:
    """Every OpInfo id of the installed torch and whether its float32 samples are differentiable (the entry
    supports autograd and lists float32 among its backward dtypes)."""

    autograd: Mapping[str, bool]

    @property
    def ids(self) -> list[str]:
        return list(self.autograd)

    def directions(self, op_id: str) -> list[str]:
        """forward, and backward where its float32 samples are differentiable."""
        return list(DIRECTIONS) if self.autograd.get(op_id) else [DIRECTIONS[0]]

    def select(self, spec: Sequence[str]) -> tuple[list[str], list[str]]:
        """``(ids, unknown)``: the ids ``spec`` names (names, globs, ``all``, ``smoke``) in the catalog's order,
        and the names or globs that match none."""
        chosen: set[str] = set()
        unknown: list[str] = []
        for pattern in spec:
            keyword = len(spec) == 1  # in a list, "all" is the op torch.all
            names = self.ids if keyword and pattern == ALL else list(SMOKE) if pattern == SMOKE_NAME else [pattern]
            hits = [i for n in names for i in self.ids if i == n or fnmatch.fnmatchcase(i, n)]
            if not hits:
                unknown.append(pattern)
            chosen.update(hits)
        return [i for i in self.ids if i in chosen], unknown


@cache
def load_catalog() -> OpCatalog:
    """The catalog, read in a child interpreter (see the module docstring); CatalogError on failure."""
    try:
        done = subprocess.run([sys.executable, "-m", __name__], capture_output=True, text=True, timeout=300,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CatalogError(f"reading torch's op database failed: {exc}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        hint = " (pip install expecttest)" if "expecttest" in done.stderr else ""
        raise CatalogError(f"reading torch's op database failed: {last}{hint}")
    pairs = json.loads(done.stdout.strip().splitlines()[-1])
    return OpCatalog({str(name): bool(grad) for name, grad in pairs})


def unseeded(op: Any, *args: Any, **kwargs: Any) -> Any:
    """``wrapper_set_seed`` without its seed: the op draws from the generator the caller seeded."""
    return op(*args, **kwargs)


@cache
def op_entries() -> dict[str, Any]:
    """The OpInfo entries by id (imports torch's op database: the op server's process only).

    The database's random ops call ``wrapper_set_seed``, which seeds torch's CPU generator with 42 before each
    call: eager is then the same under any seed, while torch_xla's generator is not seeded by it. Replaced by
    :func:`unseeded`, every random sample draws from the generators the runner seeds on both sides, and a
    random sample is known as one (eager's answer changes with the seed), never failed for its draw alone."""
    import torch.testing._internal.common_methods_invocations as cmi
    from torch.testing._internal.common_methods_invocations import op_db

    cmi.wrapper_set_seed = unseeded  # the lambdas read it from the module's globals

    found: dict[str, Any] = {}
    for op in op_db:
        found.setdefault(op.name + ("." + op.variant_test_name if op.variant_test_name else ""), op)
    return found


def differentiable(op: Any) -> bool:
    """Whether an entry's float32 samples have gradients: it supports autograd and lists float32 among its CPU
    dtypes and backward dtypes."""
    import torch

    return (bool(op.supports_autograd) and torch.float32 in op.supported_dtypes("cpu")
            and torch.float32 in op.supported_backward_dtypes("cpu"))


if __name__ == "__main__":  # load_catalog's child: each id and whether it is differentiable, as one JSON line
    print(json.dumps([[op_id, differentiable(op)] for op_id, op in op_entries().items()]))

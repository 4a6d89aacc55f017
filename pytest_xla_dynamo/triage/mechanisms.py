"""Mechanisms as data: which op a module type or a functional call runs, and the op-level entries that cover it.

The op suite (``suites/test_op.py``) checks every OpInfo entry of torch; its registry entries name their ops
(``ops = ["nn.functional.elu"]``) and directions (``modes = ["backward"]``). A model's failure localized to an
``nn.ELU`` (or an ``F.elu`` call) in the gradient's path is the ELU entry's: :data:`MODULE_OPS` and
:data:`FUNCTION_OPS` say which OpInfo ids a module type and a ``torch.nn.functional`` call stand for, and
:func:`op_explanations` finds the entries that cover them in a direction. No torch here.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_xla_dynamo.known_issues.registry import KnownIssue

#: a torch.nn module type -> the OpInfo ids of what it computes
MODULE_OPS: dict[str, tuple[str, ...]] = {
    "ELU": ("nn.functional.elu",), "CELU": ("nn.functional.celu",), "SELU": ("nn.functional.selu",),
    "GELU": ("nn.functional.gelu",), "SiLU": ("nn.functional.silu",), "Mish": ("nn.functional.mish",),
    "ReLU": ("nn.functional.relu",), "ReLU6": ("nn.functional.relu6",), "LeakyReLU": ("nn.functional.leaky_relu",),
    "PReLU": ("nn.functional.prelu",), "RReLU": ("nn.functional.rrelu",), "Hardswish": ("nn.functional.hardswish",),
    "Hardsigmoid": ("nn.functional.hardsigmoid",), "Hardtanh": ("nn.functional.hardtanh",),
    "Softplus": ("nn.functional.softplus",), "Softsign": ("nn.functional.softsign",), "Tanh": ("tanh",),
    "Sigmoid": ("sigmoid",), "Softmax": ("softmax",), "LogSoftmax": ("log_softmax",), "GLU": ("nn.functional.glu",),
    "EmbeddingBag": ("nn.functional.embedding_bag",), "Embedding": ("nn.functional.embedding",),
    "LayerNorm": ("nn.functional.layer_norm",), "GroupNorm": ("nn.functional.group_norm",),
    "Upsample": ("nn.functional.interpolate*", "nn.functional.upsample*"),
}
#: a torch.nn.functional function -> the OpInfo ids of what it computes
_NAMED_AS_FUNCTIONAL = ("elu", "celu", "selu", "gelu", "silu", "mish", "relu", "relu6", "leaky_relu", "prelu", "rrelu",
                        "hardswish", "hardsigmoid", "hardtanh", "softplus", "softsign", "glu", "embedding_bag",
                        "embedding", "layer_norm", "group_norm", "unfold", "fold")
FUNCTION_OPS: dict[str, tuple[str, ...]] = {name: (f"nn.functional.{name}",) for name in _NAMED_AS_FUNCTIONAL}
FUNCTION_OPS.update({"softmax": ("softmax",), "log_softmax": ("log_softmax",),
                     "interpolate": ("nn.functional.interpolate*",)})


@dataclass(frozen=True)
class OpExplanation:
    """An op-level entry that covers an op a failure was localized to: ``where`` names the module or call."""

    entry: KnownIssue
    op: str
    direction: str
    where: str

    def lines(self) -> list[str]:
        return [f"explained by {self.entry.id}: {self.entry.title}",
                f"({self.where} runs {self.op}, whose {self.direction} the entry covers: {self.entry.reproducer or ''})"
                .replace(": )", ")")]


def ops_of(kind: str, what: str) -> tuple[str, ...]:
    """The OpInfo ids (globs) a module type (``kind`` "module") or a functional call (``kind`` "call") stands for."""
    return (MODULE_OPS if kind == "module" else FUNCTION_OPS).get(what, ())


def _covers(entry: KnownIssue, op: str, direction: str) -> bool:
    if not entry.ops or (entry.modes and direction not in entry.modes) or not entry.affected():
        return False
    return any(fnmatch.fnmatchcase(op, glob) or fnmatch.fnmatchcase(glob, op) for glob in entry.ops)


def op_explanations(entries: Iterable[KnownIssue], suspects: Iterable[tuple[str, str, str]],
                    direction: str) -> list[OpExplanation]:
    """The op-level entries covering a suspect's op in ``direction`` ("forward", "backward"); ``suspects``:
    ``(kind, what, where)`` as the census names them (a module type or a functional call, and where it runs)."""
    entries = [e for e in entries if e.ops]
    found: dict[str, OpExplanation] = {}
    for kind, what, where in suspects:
        for op in ops_of(kind, what):
            for entry in entries:
                if entry.id not in found and _covers(entry, op, direction):
                    found[entry.id] = OpExplanation(entry, entry.ops[0] if "*" in op else op, direction, where)
    return list(found.values())

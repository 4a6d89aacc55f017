"""What the family tables share: a row (a model of a family collection) and its spec.

A family collection groups the models of one architecture family (``recurrent``, ``video``,
``segmentation``, ``detection``, ``generative``, ``recommendation``, ``graph``, ``moe``, ``speech``) whatever
library builds them; each model is named ``<family>.<name>`` and its
:attr:`ModelSpec.source` is the library.
A row holds the per-tier keyword arguments of a module-level factory and of an input builder, so a
model is data: nothing in the engines knows the families.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_xla_dynamo.zoo.inputs import InputBuilder
from pytest_xla_dynamo.zoo.spec import ModelSpec, validate_tier
from pytest_xla_dynamo.zoo.table import Tolerance, make_spec, per_tier

if TYPE_CHECKING:
    import torch

#: the family collections, in the zoo's order
FAMILIES = ("recurrent", "video", "segmentation", "detection", "generative", "recommendation", "graph", "moe",
            "speech")


class Row(NamedTuple):
    """One model of a family: ``build(tier, **model[tier])`` makes it, ``inputs(tier, batch, **data[tier])``
    its inputs. ``model`` and ``data`` are ``(small, full)`` pairs of keyword dicts."""

    family: str
    name: str
    source: str
    requires: tuple[str, ...]
    build: Callable[..., torch.nn.Module]
    model: tuple[Mapping[str, Any], Mapping[str, Any]]
    inputs: Callable[..., tuple[torch.Tensor, ...]]
    data: tuple[Mapping[str, Any], Mapping[str, Any]]
    batch: tuple[int, int]  # (small, full); full: torchbench's train batch where it has the model, else 32
    has_dropout: bool
    description: str
    tolerance: Tolerance | None = None

    @property
    def zoo_name(self) -> str:
        return f"{self.family}.{self.name}"


def _sizes(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items()) or "defaults"


def spec(row: Row) -> ModelSpec:
    """The :class:`ModelSpec` of one row."""
    if row.family not in FAMILIES:
        raise ValueError(f"model {row.name!r}: unknown family {row.family!r}; families: {', '.join(FAMILIES)}")
    model = per_tier(row.model)
    data = per_tier(row.data)
    build, make_inputs = row.build, row.inputs

    def build_model(tier: str) -> torch.nn.Module:
        return build(validate_tier(tier), **model[tier])

    def build_inputs(tier: str, batch_size: int) -> tuple[torch.Tensor, ...]:
        return make_inputs(validate_tier(tier), batch_size, **data[tier])

    inputs: InputBuilder = build_inputs
    small, full = row.batch
    return make_spec(
        row.zoo_name, row.source, build_model=build_model, build_inputs=inputs, batch=row.batch,
        has_dropout=row.has_dropout, tolerance=row.tolerance, requires=row.requires,
        description=(f"{row.description} small: {_sizes(model['small'])}; inputs {_sizes(data['small'])}, batch "
                     f"{small}. full: {_sizes(model['full'])}; inputs {_sizes(data['full'])}, batch {full}."),
        collection=row.family,
    )


def specs(rows: Sequence[Row]) -> list[ModelSpec]:
    """The specs of ``rows``, in order."""
    return [spec(row) for row in rows]

"""The model spec: how to build one zoo model and its inputs per tier, validated on creation.

Also the tier names (:data:`TIERS`, :func:`validate_tier`), the model sources (:data:`SOURCES`)
and the default loss. Nothing heavy at import time: torch is imported inside the loss.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch

TIERS = ("small", "full")
SOURCES = ("torchvision", "transformers", "timm", "torch", "diffusers", "torch_geometric", "torchaudio", "user")

#: the value of ``resolve_models`` meaning "every registered model" (reserved: no model or collection has this name)
ALL = "all"

#: the collection of the seed's nine models (and the default of :attr:`ModelSpec.collection`)
SEED_COLLECTION = "seed"


def validate_tier(tier: str) -> str:
    """Return ``tier`` if it is one of :data:`TIERS`, else raise :class:`ValueError` naming it."""
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}; valid tiers: {', '.join(TIERS)}")
    return tier


def _default_loss(out: Any) -> torch.Tensor:
    """``torch._dynamo.testing.reduce_to_scalar_loss``, the torchbench harness's loss (lazy import)."""
    from torch._dynamo.testing import reduce_to_scalar_loss

    # a float only for outputs without tensors, which no zoo model produces
    return cast("torch.Tensor", reduce_to_scalar_loss(out))


def _check_word(owner: str, what: str, value: object, selects: str) -> None:
    """A name used in comma lists: a non-empty string without commas or surrounding spaces, not ``all``."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{owner}{what} must be a non-empty string, got {value!r}")
    if "," in value or value != value.strip():
        raise ValueError(f"{owner}{what} {value!r} must not contain commas or surrounding spaces")
    if value == ALL:
        raise ValueError(f"{owner}{what} {ALL!r} is reserved (it selects every {selects})")


@dataclass(frozen=True)
class ModelSpec:
    """How to build one model and its example inputs, per tier.

    ``build_model(tier)`` returns a fresh CPU model with random init (the caller seeds torch
    first); ``build_inputs(tier, batch_size)`` returns a tuple of CPU example inputs,
    deterministic given the torch seed.
    """

    name: str
    source: str
    build_model: Callable[[str], torch.nn.Module]
    build_inputs: Callable[[str, int], tuple[torch.Tensor, ...]]
    # per tier; stored as a read-only mapping; excluded from hash (a dict is unhashable)
    batch_size: Mapping[str, int] = field(hash=False)
    loss: Callable[[Any], torch.Tensor] = _default_loss
    # per-model tolerance for torch._dynamo.utils.same (None: the suite's default)
    tolerance: float | None = None
    tolerance_reason: str = ""
    # the model contains nn.Dropout* modules (the parity suites then patch dropout by default)
    has_dropout: bool = False
    # import names the factories need, checked with importlib.util.find_spec (no import)
    requires: tuple[str, ...] = ()
    description: str = ""
    # the zoo collection the model belongs to (the seed's nine: "seed")
    collection: str = SEED_COLLECTION

    def __post_init__(self) -> None:
        _check_word("", "ModelSpec.name", self.name, "model")
        _check_word(f"model {self.name!r}: ", "collection", self.collection, "collection")
        if self.source not in SOURCES:
            raise ValueError(
                f"model {self.name!r}: unknown source {self.source!r}; valid sources: {', '.join(SOURCES)}"
            )
        if not callable(self.build_model) or not callable(self.build_inputs) or not callable(self.loss):
            raise TypeError(f"model {self.name!r}: build_model, build_inputs and loss must be callable")
        sizes = dict(self.batch_size)
        missing = [t for t in TIERS if t not in sizes]
        extra = sorted(str(t) for t in sizes if t not in TIERS)
        if missing or extra:
            raise ValueError(
                f"model {self.name!r}: batch_size needs exactly the tiers {', '.join(TIERS)}"
                + (f"; missing: {', '.join(missing)}" if missing else "")
                + (f"; unknown: {', '.join(extra)}" if extra else "")
            )
        for tier, size in sizes.items():
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"model {self.name!r}: batch_size[{tier!r}] must be a positive int, got {size!r}")
        object.__setattr__(self, "batch_size", MappingProxyType(sizes))
        if self.tolerance is not None:
            if isinstance(self.tolerance, bool) or not isinstance(self.tolerance, (int, float)):
                raise TypeError(f"model {self.name!r}: tolerance must be a float or None, got {self.tolerance!r}")
            if not self.tolerance > 0:
                raise ValueError(f"model {self.name!r}: tolerance must be > 0, got {self.tolerance!r}")
            if not self.tolerance_reason.strip():
                raise ValueError(
                    f"model {self.name!r}: tolerance={self.tolerance!r} needs a non-empty tolerance_reason"
                )
        object.__setattr__(self, "requires", tuple(self.requires))

    def batch(self, tier: str) -> int:
        """The batch size of ``tier`` (:class:`ValueError` for an unknown tier)."""
        return self.batch_size[validate_tier(tier)]

    def missing_requirements(self) -> list[str]:
        """The names in ``requires`` that cannot be imported here (found with ``find_spec``, not imported)."""
        missing = []
        for mod in self.requires:
            try:
                found = importlib.util.find_spec(mod) is not None
            except (ImportError, ValueError):  # a dotted name whose parent is missing, or a bad name
                found = False
            if not found:
                missing.append(mod)
        return missing

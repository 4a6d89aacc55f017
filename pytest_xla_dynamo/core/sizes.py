"""A model's size before any test builds it: its parameters and buffers counted on the meta device.

The collection runs the largest model first (:func:`pytest_xla_dynamo.collection.order_by_model`): what a
process keeps of the models it has run (torch_xla's compiled executables, the allocator's fragments: about
0.5 GB after the seed's nine) then never sits under the largest model's cases. Building on the meta device
allocates no storage, initialises no weights (no RNG is drawn) and touches no device; the libraries a model
needs are imported first, outside the meta device, so nothing they create at import is a meta tensor.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_xla_dynamo import zoo


def element_count(spec: zoo.ModelSpec, tier: str) -> int | None:
    """Elements in the parameters and buffers of ``spec``'s model at ``tier`` (tied weights once), or None when
    it cannot be built on the meta device here (a library missing, a builder that needs real tensors). An
    estimate for ordering only: the test that builds the model reports what fails."""
    if spec.missing_requirements():
        return None
    try:
        import torch

        for name in spec.requires:
            importlib.import_module(name)
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            model = spec.build_model(tier)
        tensors = {id(t): t.numel() for t in (*model.parameters(), *model.buffers())}
    except Exception:  # see the docstring: None is "size unknown", and the order falls back
        return None
    return sum(tensors.values())


def largest_first(specs: Iterable[zoo.ModelSpec], tier: str) -> list[str]:
    """The names of ``specs``, the largest model first (:func:`element_count`); equal sizes keep their given
    order, and models of unknown size follow the others in it."""
    specs = list(specs)
    sizes = [element_count(spec, tier) for spec in specs]
    order = sorted(range(len(specs)), key=lambda i: (sizes[i] is None, -(sizes[i] or 0), i))
    return [specs[i].name for i in order]

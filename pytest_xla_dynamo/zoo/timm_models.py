"""The timm models of the zoo, as a table: ``timm.create_model(variant, pretrained=False, **overrides)``.

The seed's timm_vision_transformer. Small tier: vit_tiny_patch16_224 (embed 192, 3 heads), 4 blocks
deep, on 64x64 images (16 patches + the cls token), 10 classes, batch 2; full tier: torchbench's
variant vit_small_patch16_224 on 224x224 images, batch 32. Inputs are standard-normal RGB images
of the variant's ``img_size`` (224 unless overridden).

NB: timm's ViT attention, when it uses fused SDPA, reads ``self.attn_drop.p`` at run time instead
of calling its Dropout module (like transformers' BERT attention, see ``transformers_models``): a
patch that replaces Dropout modules must keep a ``.p`` attribute.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_xla_dynamo.zoo.inputs import images
from pytest_xla_dynamo.zoo.spec import SEED_COLLECTION, TIERS, ModelSpec, validate_tier
from pytest_xla_dynamo.zoo.table import SMALL_CLASSES, Tolerance, make_spec, per_tier

if TYPE_CHECKING:
    import torch

SOURCE = "timm"
REQUIRES = ("torch", "timm")
#: the image size of a variant whose overrides do not set ``img_size``
DEFAULT_RES = 224

Variant = tuple[str, Mapping[str, Any]]  # (timm model name, create_model keyword overrides)


class Row(NamedTuple):
    """One timm model: per tier, the timm variant and its ``create_model`` overrides, and the batch."""

    name: str
    variant: tuple[Variant, Variant]  # (small, full)
    batch: tuple[int, int]  # (small, full); full is torchbench's DEFAULT_TRAIN_BSIZE
    has_dropout: bool
    tolerance: Tolerance | None = None
    note: str = ""  # where the full tier comes from, shown in the description
    collection: str = SEED_COLLECTION


ROWS: tuple[Row, ...] = (
    Row(
        "timm_vision_transformer",
        variant=(
            # vit_tiny: embed 192, 3 heads; shallower and on 64x64 images (16 patches + cls token)
            ("vit_tiny_patch16_224", {"img_size": 64, "depth": 4, "num_classes": SMALL_CLASSES}),
            # torchbench's timm_vision_transformer variant
            ("vit_small_patch16_224", {}),
        ),
        batch=(2, 32),
        has_dropout=True,
        note="torchbench",
    ),
)


def create(variants: Mapping[str, Variant]) -> Callable[[str], torch.nn.Module]:
    """``build_model(tier)``: ``timm.create_model`` of the tier's variant, random weights."""

    def build_model(tier: str) -> torch.nn.Module:
        variant, overrides = variants[validate_tier(tier)]
        import timm

        kwargs: dict[str, Any] = dict(overrides)
        model: torch.nn.Module = timm.create_model(variant, pretrained=False, **kwargs)
        return model

    return build_model


def _resolution(variant: Variant) -> int:
    return int(variant[1].get("img_size", DEFAULT_RES))


def _describe(variant: Variant, batch: int) -> str:
    name, overrides = variant
    if not overrides:
        res = _resolution(variant)
        return f"{name}, {res}x{res}, batch {batch}"
    parts = [f"{k}={v}" for k, v in overrides.items() if k != "num_classes"]
    if "num_classes" in overrides:
        parts.append(f"{overrides['num_classes']} classes")
    return f"{name} with {', '.join(parts)}, batch {batch}"


def spec(row: Row) -> ModelSpec:
    """The :class:`ModelSpec` of one row."""
    variants = per_tier(row.variant)
    batch = per_tier(row.batch)
    small, full = (_describe(variants[t], batch[t]) for t in TIERS)
    note = f" ({row.note})" if row.note else ""
    return make_spec(
        row.name,
        SOURCE,
        build_model=create(variants),
        build_inputs=images({t: _resolution(v) for t, v in variants.items()}),
        batch=row.batch,
        has_dropout=row.has_dropout,
        tolerance=row.tolerance,
        requires=REQUIRES,
        description=f"timm.create_model(pretrained=False). small: {small}. full: {full}{note}.",
        collection=row.collection,
    )


def specs() -> list[ModelSpec]:
    """The specs of :data:`ROWS`, in table order."""
    return [spec(row) for row in ROWS]

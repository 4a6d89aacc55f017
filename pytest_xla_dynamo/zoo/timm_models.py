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
    res: tuple[int, int] | None = None  # (small, full) image sizes of a variant without an img_size override


BROAD = "timm"  # the broad collection of timm architectures
# a broad row's small tier: 10 classes and no functional dropout (timm's heads call F.dropout with
# drop_rate, which no module patch reaches); its full tier: the variant as timm defines it
_SMALL = {"num_classes": SMALL_CLASSES, "drop_rate": 0.0}


def broad(variant: str, small: Mapping[str, Any] | None = None, *, res: int = 64, batch: int = 32,
          has_dropout: bool = False, note: str = "") -> Row:
    """A row of the broad timm collection: ``timm.<variant>``, small tier on ``res`` x ``res`` images
    (or the ``img_size`` in ``small``), full tier at timm's default size."""
    overrides = {**_SMALL, **(small or {})}
    return Row(f"{BROAD}.{variant}", variant=((variant, overrides), (variant, {})), batch=(2, batch),
               has_dropout=has_dropout, note=note, collection=BROAD,
               res=None if "img_size" in overrides else (res, DEFAULT_RES))


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
    # --- the broad collection (--xla-zoo=timm): distinct architectures, their smallest variants.
    # convnets
    broad("convnext_atto"),
    broad("resnet10t"),
    broad("resnest14d"),
    broad("cspresnet50"),
    broad("dla34"),
    broad("regnetx_002"),
    broad("rexnet_100"),
    broad("lcnet_050"),
    broad("ghostnet_100"),
    broad("mobilenetv3_small_050"),
    broad("efficientnet_b0"),
    broad("repvgg_a0"),
    broad("eca_nfnet_l0"),
    broad("poolformer_s12"),
    # vision transformers and hybrids
    broad("deit_tiny_patch16_224", {"img_size": 64}),
    broad("convit_tiny", {"img_size": 64}),
    broad("xcit_nano_12_p16_224", {"img_size": 64}),
    broad("coat_lite_tiny", {"img_size": 64}),
    broad("levit_128s", {"img_size": 64}),
    broad("mobilevit_xxs"),
    broad("edgenext_xx_small"),
    broad("fastvit_t8"),
    # MLP-mixers
    broad("mixer_s16_224", {"img_size": 64}),
    broad("resmlp_12_224", {"img_size": 64}),
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


def _resolution(variant: Variant, default: int = DEFAULT_RES) -> int:
    return int(variant[1].get("img_size", default))


def _describe(variant: Variant, batch: int, res: int) -> str:
    name, overrides = variant
    if not overrides:
        return f"{name}, {res}x{res}, batch {batch}"
    parts = [f"{k}={v}" for k, v in overrides.items() if k != "num_classes"]
    if "num_classes" in overrides:
        parts.append(f"{overrides['num_classes']} classes")
    if "img_size" not in overrides:
        parts.append(f"{res}x{res} images")
    return f"{name} with {', '.join(parts)}, batch {batch}"


def spec(row: Row) -> ModelSpec:
    """The :class:`ModelSpec` of one row."""
    variants = per_tier(row.variant)
    batch = per_tier(row.batch)
    res = per_tier(row.res) if row.res is not None else {t: DEFAULT_RES for t in TIERS}
    resolution = {t: _resolution(v, res[t]) for t, v in variants.items()}
    small, full = (_describe(variants[t], batch[t], resolution[t]) for t in TIERS)
    note = f" ({row.note})" if row.note else ""
    return make_spec(
        row.name,
        SOURCE,
        build_model=create(variants),
        build_inputs=images(resolution),
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

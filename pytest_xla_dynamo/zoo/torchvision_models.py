"""The torchvision models of the zoo, as a table: ``torchvision.models.<name>(weights=None, num_classes=...)``.

The seed's seven: resnet18, resnet50, resnext50_32x4d, alexnet, mobilenet_v2, mnasnet1_0, vgg16.
Inputs are standard-normal RGB images. Small tier: a 10-class head, batch 2 (vgg16: 1) and the
image size of the row; full tier: 1000 classes, 224x224, torchbench's training batch size.

Image sizes of the small tier (measured with ``benchmarks/zoo_probe.py --xla`` on 2 CPU cores):

* The first XLA:CPU training step is dominated by compilation, which grows with the number of ops
  and with the spatial size: at 64x64 (with ``OMP_WAIT_POLICY=PASSIVE``, see the probe), resnet18
  compiles in ~11 s, resnet50 ~18 s, resnext50_32x4d ~25 s, mobilenet_v2 and mnasnet1_0 ~45 s;
  at 48x48 (same 2x2 final feature map) the depthwise nets take about half and resnet50/resnext
  about 2/3 of that. They take 64x64, not 32x32: they downsample by 32, and at 1x1 their last
  BatchNorms would normalise over only batch x 1 x 1 = 2 values per channel (see :data:`ROWS`).
* torch_xla lowers ``adaptive_avg_pool2d`` only when the input size is a multiple of the output
  size; otherwise the op and its backward fall back to CPU (counters
  ``aten::_adaptive_avg_pool2d*``) and the step splits into several graphs (vgg16 at 32x32: three
  compilations, 2.5x the compile time of 224x224). alexnet (``AdaptiveAvgPool2d(6)``) and vgg16
  (``AdaptiveAvgPool2d(7)``) therefore keep 224x224 inputs, whose final feature maps are exactly
  6x6 and 7x7; vgg16 with batch 1, as its steps are the slowest of the zoo anyway (XLA:CPU
  convolutions; its 120M classifier parameters do not shrink with the input). The other
  torchvision models pool to 1x1 and take any size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from pytest_xla_dynamo.zoo.inputs import images
from pytest_xla_dynamo.zoo.spec import SEED_COLLECTION, ModelSpec, validate_tier
from pytest_xla_dynamo.zoo.table import FULL_CLASSES, SMALL_CLASSES, TORCHBENCH_HIGHER, Tolerance, make_spec

if TYPE_CHECKING:
    import torch

SOURCE = "torchvision"
REQUIRES = ("torch", "torchvision")
#: the full tier's image size
FULL_RES = 224


class Row(NamedTuple):
    """One torchvision model: its ``torchvision.models`` factory name and its sizes."""

    name: str
    small_res: int  # small-tier image size (full: FULL_RES)
    batch: tuple[int, int]  # (small, full); full is torchbench's DEFAULT_TRAIN_BSIZE
    has_dropout: bool
    tolerance: Tolerance | None = None
    note: str = ""  # why the small tier deviates, shown in the description
    collection: str = SEED_COLLECTION


# Full batch sizes: torchbench's DEFAULT_TRAIN_BSIZE of each model (pytorch/benchmark
# torchbenchmark/models/*/__init__.py).
# Small-tier images are at least 64x64: these nets downsample by 32, and at 32x32 (1x1 at the end)
# their last BatchNorms normalise over batch x 1 x 1 = 2 values, where even fp32 eager is 5e-2 away
# from fp64 on the loss; at 64x64 they see 8 values per channel.
ROWS: tuple[Row, ...] = (
    Row("resnet18", 64, (2, 16), has_dropout=False),
    Row("resnet50", 64, (2, 32), has_dropout=False),
    Row("resnext50_32x4d", 64, (2, 8), has_dropout=False),
    Row(
        "alexnet", 224, (2, 128), has_dropout=True, tolerance=TORCHBENCH_HIGHER,
        note="224: AdaptiveAvgPool2d(6) needs a 6x6 feature map to stay on XLA",
    ),
    Row("mobilenet_v2", 64, (2, 96), has_dropout=True),
    Row("mnasnet1_0", 64, (2, 32), has_dropout=True),
    Row(
        "vgg16", 224, (1, 64), has_dropout=True, tolerance=TORCHBENCH_HIGHER,
        note="224: AdaptiveAvgPool2d(7) needs a 7x7 feature map to stay on XLA",
    ),
)


def classifier(name: str) -> Callable[[str], torch.nn.Module]:
    """``build_model(tier)``: ``torchvision.models.<name>`` with random weights and the tier's class count."""

    def build_model(tier: str) -> torch.nn.Module:
        num_classes = SMALL_CLASSES if validate_tier(tier) == "small" else FULL_CLASSES
        import torchvision

        factory = getattr(torchvision.models, name)
        model: torch.nn.Module = factory(weights=None, num_classes=num_classes)
        return model

    return build_model


def spec(row: Row) -> ModelSpec:
    """The :class:`ModelSpec` of one row."""
    small_batch, full_batch = row.batch
    note = f" ({row.note})" if row.note else ""
    return make_spec(
        row.name,
        SOURCE,
        build_model=classifier(row.name),
        build_inputs=images({"small": row.small_res, "full": FULL_RES}),
        batch=row.batch,
        has_dropout=row.has_dropout,
        tolerance=row.tolerance,
        requires=REQUIRES,
        description=(
            f"torchvision.models.{row.name}(weights=None). small: {row.small_res}x{row.small_res} images, "
            f"batch {small_batch}, {SMALL_CLASSES} classes{note}. full: {FULL_RES}x{FULL_RES}, batch {full_batch} "
            f"(torchbench train batch), {FULL_CLASSES} classes."
        ),
        collection=row.collection,
    )


def specs() -> list[ModelSpec]:
    """The specs of :data:`ROWS`, in table order."""
    return [spec(row) for row in ROWS]

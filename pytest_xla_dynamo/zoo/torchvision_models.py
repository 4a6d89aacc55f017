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
from typing import TYPE_CHECKING, Any, NamedTuple

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
    kwargs: tuple[tuple[str, Any], ...] = ()  # extra keyword arguments of the factory

    @property
    def zoo_name(self) -> str:
        """The model's name in the zoo: the factory's, prefixed by its collection outside the seed's
        (``torchvision.resnet34``)."""
        return self.name if self.collection == SEED_COLLECTION else f"{self.collection}.{self.name}"


BROAD = "torchvision"  # the broad collection of torchvision classifiers
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
    # --- the broad collection (--xla-zoo=torchvision): names "torchvision.<factory>". Full batch: torchbench's
    # where it has the model, else 32. has_dropout: nn.Dropout* modules, or stochastic depth (a random op
    # in training that the dropout patch switches off as well).
    Row("resnet34", 64, (2, 32), has_dropout=False, collection=BROAD),
    Row("resnet101", 64, (2, 32), has_dropout=False, collection=BROAD),
    Row("wide_resnet50_2", 64, (2, 32), has_dropout=False, collection=BROAD),
    Row("densenet121", 64, (2, 32), has_dropout=False, collection=BROAD),
    Row("squeezenet1_0", 64, (2, 32), has_dropout=True, collection=BROAD),
    Row("squeezenet1_1", 64, (2, 32), has_dropout=True, collection=BROAD),
    Row("shufflenet_v2_x0_5", 64, (2, 32), has_dropout=False, collection=BROAD),
    Row("shufflenet_v2_x1_0", 64, (2, 128), has_dropout=False, collection=BROAD),
    Row("mobilenet_v3_small", 64, (2, 32), has_dropout=True, collection=BROAD),
    Row("mobilenet_v3_large", 64, (2, 32), has_dropout=True, collection=BROAD),
    Row("mnasnet0_5", 64, (2, 32), has_dropout=True, collection=BROAD),
    Row("efficientnet_b0", 64, (2, 32), has_dropout=True, collection=BROAD),
    Row("efficientnet_v2_s", 64, (2, 32), has_dropout=True, collection=BROAD),
    Row("regnet_x_400mf", 64, (2, 32), has_dropout=False, collection=BROAD),
    Row("regnet_y_400mf", 64, (2, 32), has_dropout=False, collection=BROAD),
    Row("googlenet", 64, (2, 32), has_dropout=True, collection=BROAD,
        kwargs=(("aux_logits", False), ("init_weights", True))),
    Row("inception_v3", 139, (2, 32), has_dropout=True, collection=BROAD,
        kwargs=(("aux_logits", False), ("init_weights", True)),
        note="139: inception_v3 needs at least 75x75; 139 leaves a 3x3 map for its last BatchNorms"),
    Row("convnext_tiny", 64, (2, 32), has_dropout=True, collection=BROAD),
    Row("swin_t", 64, (2, 32), has_dropout=True, collection=BROAD),
    Row("swin_v2_t", 64, (2, 32), has_dropout=True, collection=BROAD),
    Row("vit_b_32", 64, (2, 32), has_dropout=True, collection=BROAD, kwargs=(("image_size", 64),),
        note="64: image_size=64 (4 patches of 32x32 and the class token)"),
    Row("vgg11_bn", 224, (1, 32), has_dropout=True, collection=BROAD,
        note="224: AdaptiveAvgPool2d(7) needs a 7x7 feature map to stay on XLA"),
)


def classifier(name: str, extra: tuple[tuple[str, Any], ...] = (),
               resolution: dict[str, int] | None = None) -> Callable[[str], torch.nn.Module]:
    """``build_model(tier)``: ``torchvision.models.<name>`` with random weights and the tier's class count
    (plus ``extra`` keyword arguments; an ``image_size`` among them takes the tier's ``resolution``)."""

    def build_model(tier: str) -> torch.nn.Module:
        num_classes = SMALL_CLASSES if validate_tier(tier) == "small" else FULL_CLASSES
        import torchvision

        kwargs = dict(extra)
        if "image_size" in kwargs and resolution is not None:
            kwargs["image_size"] = resolution[tier]
        factory = getattr(torchvision.models, name)
        model: torch.nn.Module = factory(weights=None, num_classes=num_classes, **kwargs)
        return model

    return build_model


def spec(row: Row) -> ModelSpec:
    """The :class:`ModelSpec` of one row."""
    small_batch, full_batch = row.batch
    note = f" ({row.note})" if row.note else ""
    extra = "".join(f", {k}={v!r}" for k, v in row.kwargs if k != "image_size")
    resolution = {"small": row.small_res, "full": FULL_RES}
    return make_spec(
        row.zoo_name,
        SOURCE,
        build_model=classifier(row.name, row.kwargs, resolution),
        build_inputs=images(resolution),
        batch=row.batch,
        has_dropout=row.has_dropout,
        tolerance=row.tolerance,
        requires=REQUIRES,
        description=(
            f"torchvision.models.{row.name}(weights=None{extra}). small: {row.small_res}x{row.small_res} images, "
            f"batch {small_batch}, {SMALL_CLASSES} classes{note}. full: {FULL_RES}x{FULL_RES}, batch {full_batch} "
            f"(torchbench train batch), {FULL_CLASSES} classes."
        ),
        collection=row.collection,
    )


def specs() -> list[ModelSpec]:
    """The specs of :data:`ROWS`, in table order."""
    return [spec(row) for row in ROWS]

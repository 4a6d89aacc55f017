"""The torchvision models of the family collections: video, segmentation and detection.

All built with ``weights=None, weights_backbone=None`` (random init, no download).

* ``video``: ``torchvision.models.video`` r3d_18, mc3_18, r2plus1d_18 on clips ``batch x 3 x T x H x W``.
  Small: 4 frames of 32x32 (their last stage sees 1x2x2, BatchNorm3d over 8 values a channel), 10 classes,
  batch 2; full: 16 frames of 112x112 (the Kinetics recipe), 400 classes, batch 32. s3d is not in the
  table: its head is a fixed ``AvgPool3d((2, 7, 7))`` that needs at least 224x224 frames and ~14 frames,
  which no small tier affords on 2 CPU cores.
* ``segmentation``: ``torchvision.models.segmentation`` fcn_resnet50, deeplabv3_mobilenet_v3_large,
  lraspp_mobilenet_v3_large, whose output is a dict (``{"out": batch x classes x H x W}``). Small: 64x64
  images, 10 classes, batch 2 (fcn's dilated backbone ends at 8x8); full: 520x520 (torchvision's
  training crop), 21 classes, batch 4 (torchbench's ``fcn_resnet50`` / ``deeplabv3`` batch is not known
  here; torchvision's reference script uses 4 per GPU).
* ``detection``: ``torchvision.models.detection`` fasterrcnn_mobilenet_v3_large_fpn,
  retinanet_resnet50_fpn, ssdlite320_mobilenet_v3_large behind :class:`nets.Detection`
  (``forward(images, boxes, labels)``): training takes one target box and label per image and returns
  the dict of losses; inference returns a list of dicts whose sizes depend on the data (NMS). Small: 128x128
  images (the transform's ``min_size``/``max_size`` set to 128; ssdlite's transform always resizes to
  320x320), 3 classes, batch 2; full: 800-pixel images (ssdlite 320), 91 classes, batch 4.
  ssdlite320_mobilenet_v3_large's BatchNorm statistics are warmed (:func:`warm_norms`): at random init with the
  default running statistics (mean 0, variance 1) its eval-mode features shrink layer by layer to ~1e-25, every
  class logit is ~1e-15 and every score exactly 1/3, so which of the tied boxes NMS keeps is the sort's tie
  order (eager fp32, eager fp64 and XLA kept different numbers of boxes): a property of the inputs, not of a
  backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.zoo.family import Row
from pytest_xla_dynamo.zoo.family import specs as _specs
from pytest_xla_dynamo.zoo.spec import ModelSpec

if TYPE_CHECKING:
    import torch

SOURCE = "torchvision"
REQUIRES = ("torch", "torchvision")


def video(tier: str, *, name: str, num_classes: int) -> torch.nn.Module:
    import torchvision

    model: torch.nn.Module = getattr(torchvision.models.video, name)(weights=None, num_classes=num_classes)
    return model


def segmentation(tier: str, *, name: str, num_classes: int, **kw: Any) -> torch.nn.Module:
    import torchvision

    factory = getattr(torchvision.models.segmentation, name)
    model: torch.nn.Module = factory(weights=None, weights_backbone=None, num_classes=num_classes, **kw)
    return model


def detection(tier: str, *, name: str, num_classes: int, norm_warmup: int = 0, **kw: Any) -> torch.nn.Module:
    """A torchvision detection model behind :class:`nets.Detection`; ``norm_warmup``: :func:`warm_norms` batches."""
    import torchvision

    from pytest_xla_dynamo.zoo import nets

    factory = getattr(torchvision.models.detection, name)
    model = factory(weights=None, weights_backbone=None, num_classes=num_classes, **kw)
    if norm_warmup:
        warm_norms(model, norm_warmup)
    return nets.Detection(model)


def warm_norms(model: torch.nn.Module, batches: int, batch: int = 2, res: int = 128) -> None:
    """Give a detection model's BatchNorm layers the running statistics of its backbone on ``batches`` batches
    of random images (training-mode forwards without gradients, a cumulative average), so that its eval mode is
    not degenerate at random init; momentum and mode are restored (the model is left in training mode)."""
    import torch

    if any(p.is_meta for p in model.parameters()):
        return  # built on the meta device (core.sizes counts its elements): no values to warm
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # the cumulative average of the batches' statistics
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            images, _ = model.transform(list(torch.rand(batch, 3, res, res)))  # type: ignore[operator]
            model.backbone(images.tensors)  # type: ignore[operator]
    for norm, momentum in zip(norms, momenta, strict=True):
        norm.momentum = momentum


def clips(tier: str, batch: int, *, frames: int, res: int) -> tuple[torch.Tensor, ...]:
    """Standard-normal clips, ``batch x 3 x frames x res x res``."""
    import torch

    return (torch.randn(batch, 3, frames, res, res),)


def images(tier: str, batch: int, *, res: int) -> tuple[torch.Tensor, ...]:
    """Standard-normal images, ``batch x 3 x res x res``."""
    import torch

    return (torch.randn(batch, 3, res, res),)


def boxed_images(tier: str, batch: int, *, res: int, classes: int) -> tuple[torch.Tensor, ...]:
    """Images in [0, 1) (``batch x 3 x res x res``), one box per image (``batch x 1 x 4``, x1 < x2, y1 < y2,
    at least 8 pixels wide) and its label in ``[1, classes)`` (``batch x 1``, int64)."""
    import torch

    corner = torch.rand(batch, 1, 2) * res / 2
    size = torch.rand(batch, 1, 2) * (res / 2 - 8) + 8
    boxes = torch.cat([corner, corner + size], dim=2)
    return torch.rand(batch, 3, res, res), boxes, torch.randint(1, classes, (batch, 1))


def _video(name: str) -> Row:
    return Row("video", name, SOURCE, REQUIRES, video,
               ({"name": name, "num_classes": 10}, {"name": name, "num_classes": 400}),
               clips, ({"frames": 4, "res": 32}, {"frames": 16, "res": 112}), (2, 32), False,
               f"torchvision.models.video.{name}(weights=None), forward(clips) -> logits.")


def _segmentation(name: str, has_dropout: bool, **kw: Any) -> Row:
    return Row("segmentation", name, SOURCE, REQUIRES, segmentation,
               ({"name": name, "num_classes": 10, **kw}, {"name": name, "num_classes": 21, **kw}),
               images, ({"res": 64}, {"res": 520}), (2, 4), has_dropout,
               f"torchvision.models.segmentation.{name}(weights=None, weights_backbone=None"
               + "".join(f", {k}={v!r}" for k, v in kw.items()) + "), forward(images) -> {'out': masks}.")


def _detection(name: str, small: dict[str, Any], full: dict[str, Any], res: tuple[int, int]) -> Row:
    return Row("detection", name, SOURCE, REQUIRES, detection,
               ({"name": name, "num_classes": 3, **small}, {"name": name, "num_classes": 91, **full}),
               boxed_images, ({"res": res[0], "classes": 3}, {"res": res[1], "classes": 91}), (2, 4), False,
               f"torchvision.models.detection.{name}(weights=None, weights_backbone=None) behind nets.Detection: "
               "training forward(images, boxes, labels) -> dict of losses; inference -> list of detections.")


ROWS: tuple[Row, ...] = (
    _video("r3d_18"),
    _video("mc3_18"),
    _video("r2plus1d_18"),
    _segmentation("fcn_resnet50", True, aux_loss=False),
    _segmentation("deeplabv3_mobilenet_v3_large", True, aux_loss=False),
    _segmentation("lraspp_mobilenet_v3_large", False),
    _detection("fasterrcnn_mobilenet_v3_large_fpn", {"min_size": 128, "max_size": 128}, {}, (128, 800)),
    _detection("retinanet_resnet50_fpn", {"min_size": 128, "max_size": 128}, {}, (128, 800)),
    _detection("ssdlite320_mobilenet_v3_large", {"norm_warmup": 4}, {"norm_warmup": 4}, (128, 320)),
)


def specs() -> list[ModelSpec]:
    """The specs of :data:`ROWS`, in table order."""
    return _specs(ROWS)

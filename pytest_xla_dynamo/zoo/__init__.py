"""The model zoo: the seed's nine models, each buildable at two sizes.

The seed (pytorch PR #88449, "training support for dynamo+torchxla integration") benchmarked
dynamo + torch_xla training on nine torchbench models. The zoo registers the same nine names,
in the same order, built from the public libraries instead of torchbench's checkout:

* torchvision (``weights=None``): resnet18, resnet50, resnext50_32x4d, alexnet, mobilenet_v2,
  mnasnet1_0, vgg16;
* transformers: BERT_pytorch, a masked-LM BERT built from a :class:`transformers.BertConfig`
  (never downloaded), standing in for torchbench's hand-written BERT_pytorch;
* timm: timm_vision_transformer (``pretrained=False``).

Each model has two tiers:

``small`` (default)
    CI-sized: runs forward + backward on 2 CPU cores, eagerly and on XLA:CPU, in seconds.
    Same architecture as ``full``, smaller inputs and (only where a library offers a knob for it)
    a narrower/shallower configuration and a 10-class head.
``full``
    torchbench-like: 224x224 images, torchbench's default training batch sizes
    (``DEFAULT_TRAIN_BSIZE``), BERT at bert-base size with sequence length 128.

Each model belongs to a collection (:attr:`ModelSpec.collection`); the seed's nine are ``seed``, the
default of ``--xla-zoo``. The broad collections ``torchvision``, ``timm`` and ``transformers``
name their models ``<collection>.<name>`` (``timm.convnext_atto``: a dot, safe in file names and
artifacts); ``--xla-zoo=all`` selects every one.

Nothing heavy is imported at module import time: torch, torchvision, timm and transformers are
imported inside the factories, so ``--help``, collection and option validation stay cheap and
work where the ML stack is missing (``ModelSpec.missing_requirements`` then names what is
missing).

Layout: ``spec`` (:class:`ModelSpec`, tiers, validation, the default loss), ``registry``
(register, look up, resolve names), ``inputs`` (input factories, :func:`randomize_inputs`),
``table`` (what the model tables share), and one table per source: ``torchvision_models``,
``transformers_models``, ``timm_models`` (each module documents its models' sizes). A model is
added as a row of its source's ``ROWS``.

The family collections (``recurrent``, ``video``, ``segmentation``, ``detection``,
``generative``, ``recommendation``, ``graph``, ``moe``, ``speech``: :data:`family.FAMILIES`) group models by
architecture whatever library builds them; their rows (``family.Row``) live in one module per source:
``torch_models`` (plain ``torch.nn``, networks in ``nets``), ``torchvision_families``,
``diffusers_models``, ``pyg_models`` (torch_geometric), ``moe_models`` (transformers) and, for ``speech``,
``torchaudio_models``.
"""

from __future__ import annotations

from pytest_xla_dynamo.zoo import (
    diffusers_models,
    moe_models,
    pyg_models,
    timm_models,
    torch_models,
    torchaudio_models,
    torchvision_families,
    torchvision_models,
    transformers_models,
)
from pytest_xla_dynamo.zoo.family import FAMILIES
from pytest_xla_dynamo.zoo.inputs import randomize_inputs
from pytest_xla_dynamo.zoo.registry import (
    MODELS,
    UnknownModelError,
    collection_names,
    get_model,
    model_names,
    models_in,
    register_model,
    resolve_models,
)
from pytest_xla_dynamo.zoo.spec import SEED_COLLECTION, SOURCES, TIERS, ModelSpec, validate_tier

__all__ = [
    "MODELS",
    "SEED_COLLECTION",
    "SOURCES",
    "TIERS",
    "ModelSpec",
    "UnknownModelError",
    "collection_names",
    "get_model",
    "model_names",
    "models_in",
    "randomize_inputs",
    "register_model",
    "resolve_models",
    "validate_tier",
]

# the seed's order first (the torchvision seven, BERT_pytorch, timm_vision_transformer), then the broad
# collections, each in its source's table order
# then the family collections (zoo/family.py), in FAMILIES order
_sources = (torchvision_models, transformers_models, timm_models, torch_models, torchvision_families, diffusers_models,
            pyg_models, moe_models, torchaudio_models)
_specs = [spec for source in _sources for spec in source.specs()]
_order = dict.fromkeys([SEED_COLLECTION, *(s.collection for s in _specs if s.collection not in FAMILIES), *FAMILIES])
for _collection in _order:
    for _spec in _specs:
        if _spec.collection == _collection:
            register_model(_spec)
del _sources, _specs, _order, _collection, _spec

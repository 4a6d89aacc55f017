"""The plain ``torch.nn`` models of the family collections: recurrent nets, the DCGAN pair, DLRMs.

The networks are :mod:`pytest_xla_dynamo.zoo.nets` (imported by the factories only). Sizes:

* ``recurrent``: word-level LSTM/GRU language models (pytorch/examples word_language_model), bidirectional
  LSTM/GRU classifiers and an LSTM encoder-decoder with teacher forcing. Small: a 1000-word vocabulary,
  embedding 32, hidden 64, one layer, 16 steps, batch 2 (a compile of seconds). Full: the example's
  medium model (embedding and hidden 650, 2 layers, 35 steps, batch 20, a 10000-word vocabulary).
* ``generative``: the DCGAN generator and discriminator (pytorch/examples dcgan; torchbench ``dcgan``,
  batch 32). Small: 32x32 images (nz 16, ngf/ndf 8); full: 64x64 (nz 100, ngf/ndf 64), batch 32.
* ``recommendation``: DLRM (facebookresearch/dlrm; torchbench ``dlrm``'s Criteo-like shape): 13 dense
  features, ``nn.EmbeddingBag`` tables, bags of fixed length given by indices and offsets, a dot or a
  concatenation interaction. Small: 4 tables of 100 rows, dim 16, bags of 3, batch 2; full: 8 tables of
  10000 rows, dim 64, bags of 10, batch 2048 (dlrm's mini-batch default is 2048 in its benchmark scripts;
  torchbench's is not known here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_xla_dynamo.zoo.family import Row
from pytest_xla_dynamo.zoo.family import specs as _specs
from pytest_xla_dynamo.zoo.spec import ModelSpec

if TYPE_CHECKING:
    import torch

SOURCE = "torch"
REQUIRES = ("torch",)


def rnn_lm(tier: str, **kw: int | str) -> torch.nn.Module:
    from pytest_xla_dynamo.zoo import nets

    return nets.RNNLanguageModel(**kw)  # type: ignore[arg-type]


def rnn_classifier(tier: str, **kw: int | str) -> torch.nn.Module:
    from pytest_xla_dynamo.zoo import nets

    return nets.RNNClassifier(**kw)  # type: ignore[arg-type]


def seq2seq(tier: str, **kw: int) -> torch.nn.Module:
    from pytest_xla_dynamo.zoo import nets

    return nets.Seq2Seq(**kw)


def dcgan_generator(tier: str, **kw: int) -> torch.nn.Module:
    from pytest_xla_dynamo.zoo import nets

    return nets.DCGANGenerator(**kw)


def dcgan_discriminator(tier: str, **kw: int) -> torch.nn.Module:
    from pytest_xla_dynamo.zoo import nets

    return nets.DCGANDiscriminator(**kw)


def dlrm(tier: str, **kw: object) -> torch.nn.Module:
    from pytest_xla_dynamo.zoo import nets

    return nets.DLRM(**kw)  # type: ignore[arg-type]


def ids(tier: str, batch: int, *, vocab: int, steps: int, count: int = 1) -> tuple[torch.Tensor, ...]:
    """``count`` tensors of uniform token ids, ``batch x steps``."""
    import torch

    return tuple(torch.randint(0, vocab, (batch, steps)) for _ in range(count))


def noise(tier: str, batch: int, *, nz: int) -> tuple[torch.Tensor, ...]:
    """Standard-normal latent vectors, ``batch x nz x 1 x 1``."""
    import torch

    return (torch.randn(batch, nz, 1, 1),)


def images(tier: str, batch: int, *, res: int, channels: int = 3) -> tuple[torch.Tensor, ...]:
    """Standard-normal images, ``batch x channels x res x res``."""
    import torch

    return (torch.randn(batch, channels, res, res),)


def criteo(tier: str, batch: int, *, dense: int, rows: list[int], bag: int) -> tuple[torch.Tensor, ...]:
    """DLRM inputs: dense features (``batch x dense``), per table the indices of ``batch`` bags of ``bag``
    rows (``tables x batch*bag``, int64) and the bags' offsets (``tables x batch``, int64)."""
    import torch

    indices = torch.stack([torch.randint(0, n, (batch * bag,)) for n in rows])
    offsets = (torch.arange(batch) * bag).repeat(len(rows), 1)
    return torch.randn(batch, dense), indices, offsets


_LM_SMALL = {"vocab": 1000, "embed": 32, "hidden": 64, "layers": 1}
_LM_FULL = {"vocab": 10000, "embed": 650, "hidden": 650, "layers": 2}
_SEQ_SMALL = {"vocab": 1000, "steps": 16}
_SEQ_FULL = {"vocab": 10000, "steps": 35}
_G_SMALL = {"nz": 16, "ngf": 8, "nc": 3, "ups": 3}
_G_FULL = {"nz": 100, "ngf": 64, "nc": 3, "ups": 4}
_D_SMALL = {"nc": 3, "ndf": 8, "downs": 3}
_D_FULL = {"nc": 3, "ndf": 64, "downs": 4}
_DLRM_SMALL = {"dense": 13, "bottom": [32], "rows": [100] * 4, "dim": 16, "top": [32]}
_DLRM_FULL = {"dense": 13, "bottom": [512, 256], "rows": [10000] * 8, "dim": 64, "top": [512, 256]}
_CRITEO_SMALL = {"dense": 13, "rows": [100] * 4, "bag": 3}
_CRITEO_FULL = {"dense": 13, "rows": [10000] * 8, "bag": 10}

ROWS: tuple[Row, ...] = (
    Row("recurrent", "lstm_lm", SOURCE, REQUIRES, rnn_lm, ({"cell": "lstm", **_LM_SMALL}, {"cell": "lstm", **_LM_FULL}),
        ids, (_SEQ_SMALL, _SEQ_FULL), (2, 20), False,
        "An LSTM word language model (pytorch/examples word_language_model), forward(ids) -> logits."),
    Row("recurrent", "gru_lm", SOURCE, REQUIRES, rnn_lm, ({"cell": "gru", **_LM_SMALL}, {"cell": "gru", **_LM_FULL}),
        ids, (_SEQ_SMALL, _SEQ_FULL), (2, 20), False,
        "A GRU word language model, forward(ids) -> logits."),
    Row("recurrent", "lstm_classifier", SOURCE, REQUIRES, rnn_classifier,
        ({"cell": "lstm", **_LM_SMALL, "classes": 10}, {"cell": "lstm", **_LM_FULL, "classes": 10}),
        ids, (_SEQ_SMALL, _SEQ_FULL), (2, 32), False,
        "A bidirectional LSTM sequence classifier (last step's features), forward(ids) -> logits."),
    Row("recurrent", "gru_classifier", SOURCE, REQUIRES, rnn_classifier,
        ({"cell": "gru", **_LM_SMALL, "classes": 10}, {"cell": "gru", **_LM_FULL, "classes": 10}),
        ids, (_SEQ_SMALL, _SEQ_FULL), (2, 32), False,
        "A bidirectional GRU sequence classifier (last step's features), forward(ids) -> logits."),
    Row("recurrent", "seq2seq_lstm", SOURCE, REQUIRES, seq2seq, (_LM_SMALL, _LM_FULL),
        ids, ({**_SEQ_SMALL, "count": 2}, {**_SEQ_FULL, "count": 2}), (2, 32), False,
        "An LSTM encoder-decoder with teacher forcing, forward(src_ids, tgt_ids) -> logits."),
    Row("generative", "dcgan_generator", SOURCE, REQUIRES, dcgan_generator, (_G_SMALL, _G_FULL),
        noise, ({"nz": 16}, {"nz": 100}), (2, 32), False,
        "The DCGAN generator (pytorch/examples dcgan), forward(noise) -> images."),
    Row("generative", "dcgan_discriminator", SOURCE, REQUIRES, dcgan_discriminator, (_D_SMALL, _D_FULL),
        images, ({"res": 32}, {"res": 64}), (2, 32), False,
        "The DCGAN discriminator, forward(images) -> one logit per image."),
    Row("recommendation", "dlrm", SOURCE, REQUIRES, dlrm,
        ({**_DLRM_SMALL, "interaction": "dot", "mode": "sum"}, {**_DLRM_FULL, "interaction": "dot", "mode": "sum"}),
        criteo, (_CRITEO_SMALL, _CRITEO_FULL), (2, 2048), False,
        "DLRM with sum-pooled nn.EmbeddingBag tables and the pairwise dot interaction, "
        "forward(dense, indices, offsets) -> click logit."),
    Row("recommendation", "dlrm_cat_mean", SOURCE, REQUIRES, dlrm,
        ({**_DLRM_SMALL, "interaction": "cat", "mode": "mean"}, {**_DLRM_FULL, "interaction": "cat", "mode": "mean"}),
        criteo, (_CRITEO_SMALL, _CRITEO_FULL), (2, 2048), False,
        "DLRM with mean-pooled nn.EmbeddingBag tables and the concatenation interaction, "
        "forward(dense, indices, offsets) -> click logit."),
)


def specs() -> list[ModelSpec]:
    """The specs of :data:`ROWS`, in table order."""
    return _specs(ROWS)

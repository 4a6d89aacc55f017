"""The plain ``torch.nn`` networks and adapters of the family collections. Imports torch.

Only the ``build_model`` factories of the family tables import this module, so that importing the zoo
stays cheap. Every class lives at module level (picklable). Each network is a textbook version of its
family, kept small by its constructor's arguments; adapters turn a library's calling convention into
``forward(*tensors)`` so that a row of data (tensors in, tensors or dicts of tensors out) describes the
model to the engines.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import nn


def _rnn(cell: str, inputs: int, hidden: int, layers: int, bidirectional: bool = False) -> nn.Module:
    """``nn.LSTM`` or ``nn.GRU``, batch first."""
    kinds = {"lstm": nn.LSTM, "gru": nn.GRU}
    return kinds[cell](inputs, hidden, num_layers=layers, batch_first=True, bidirectional=bidirectional)


class RNNLanguageModel(nn.Module):
    """pytorch/examples' word_language_model: embedding, an LSTM/GRU, a linear decoder over the vocabulary."""

    def __init__(self, cell: str, vocab: int, embed: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.rnn = _rnn(cell, embed, hidden, layers)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.embed(ids))
        logits: torch.Tensor = self.decoder(out)
        return logits


class RNNClassifier(nn.Module):
    """A sequence classifier: embedding, a bidirectional LSTM/GRU, the last step's features to a linear head."""

    def __init__(self, cell: str, vocab: int, embed: int, hidden: int, layers: int, classes: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.rnn = _rnn(cell, embed, hidden, layers, bidirectional=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.embed(ids))
        logits: torch.Tensor = self.head(out[:, -1])
        return logits


class Seq2Seq(nn.Module):
    """An encoder-decoder LSTM with teacher forcing: the encoder's final state starts the decoder, which reads
    the target ids and predicts the next ones (Sutskever et al. 2014, without attention)."""

    def __init__(self, vocab: int, embed: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(vocab, embed)
        self.tgt_embed = nn.Embedding(vocab, embed)
        self.encoder = _rnn("lstm", embed, hidden, layers)
        self.decoder = _rnn("lstm", embed, hidden, layers)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        _, state = self.encoder(self.src_embed(src))
        dec, _ = self.decoder(self.tgt_embed(tgt), state)
        logits: torch.Tensor = self.out(dec)
        return logits


class DCGANGenerator(nn.Module):
    """The DCGAN generator (Radford et al. 2015; pytorch/examples dcgan): transposed convolutions with
    BatchNorm and ReLU from a ``nz x 1 x 1`` noise to a ``nc x 4*2**ups x 4*2**ups`` image (tanh)."""

    def __init__(self, nz: int, ngf: int, nc: int, ups: int) -> None:
        super().__init__()
        width = ngf * 2 ** (ups - 1)
        layers: list[nn.Module] = [nn.ConvTranspose2d(nz, width, 4, 1, 0, bias=False), nn.BatchNorm2d(width),
                                   nn.ReLU(True)]
        for _ in range(ups - 1):
            layers += [nn.ConvTranspose2d(width, width // 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width // 2),
                       nn.ReLU(True)]
            width //= 2
        layers += [nn.ConvTranspose2d(width, nc, 4, 2, 1, bias=False), nn.Tanh()]
        self.main = nn.Sequential(*layers)

    def forward(self, noise: torch.Tensor) -> torch.Tensor:
        image: torch.Tensor = self.main(noise)
        return image


class DCGANDiscriminator(nn.Module):
    """The DCGAN discriminator: strided convolutions with BatchNorm and LeakyReLU down to one logit per image."""

    def __init__(self, nc: int, ndf: int, downs: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
        width = ndf
        for _ in range(downs - 1):
            layers += [nn.Conv2d(width, width * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 2),
                       nn.LeakyReLU(0.2, inplace=True)]
            width *= 2
        layers += [nn.Conv2d(width, 1, 4, 1, 0, bias=False)]
        self.main = nn.Sequential(*layers)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        logit: torch.Tensor = self.main(image).flatten(1)
        return logit


def _mlp(sizes: list[int], last_relu: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """A DLRM (Naumov et al. 2019; facebookresearch/dlrm): a bottom MLP over the dense features, one
    ``nn.EmbeddingBag`` table per sparse feature (bags given by indices and offsets), the interaction of
    the resulting vectors (``dot``: their pairwise dot products, the upper triangle; ``cat``: their
    concatenation) and a top MLP to one click logit."""

    def __init__(self, dense: int, bottom: list[int], rows: list[int], dim: int, top: list[int],
                 interaction: str, mode: str) -> None:
        super().__init__()
        self.bottom = _mlp([dense, *bottom, dim], last_relu=True)
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, dim, mode=mode) for n in rows)
        self.interaction = interaction
        vectors = len(rows) + 1
        width = dim + vectors * (vectors - 1) // 2 if interaction == "dot" else dim * vectors
        self.top = _mlp([width, *top, 1], last_relu=False)
        tri = torch.triu_indices(vectors, vectors, offset=1)
        self.register_buffer("pairs", tri[0] * vectors + tri[1], persistent=False)

    def forward(self, dense: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        bags = [table(indices[i], offsets[i]) for i, table in enumerate(self.tables)]
        if self.interaction == "dot":
            t = torch.stack([x, *bags], dim=1)  # batch x vectors x dim
            pairs: torch.Tensor = self.pairs  # type: ignore[assignment]
            z = torch.bmm(t, t.transpose(1, 2)).flatten(1)[:, pairs]
            features = torch.cat([x, z], dim=1)
        else:
            features = torch.cat([x, *bags], dim=1)
        logit: torch.Tensor = self.top(features)
        return logit


class DiffusersOutput(nn.Module):
    """A diffusers model with ``forward(*tensors)`` returning its first output tensor (``return_dict=False``);
    ``kwargs`` are fixed keyword arguments of each call."""

    def __init__(self, model: nn.Module, **kwargs: Any) -> None:
        super().__init__()
        self.model = model
        self.kwargs = kwargs

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.model(*args, return_dict=False, **self.kwargs)[0]
        return out


class Detection(nn.Module):
    """A torchvision detection model with ``forward(images, boxes, labels)``: training passes the targets
    (``[{"boxes": boxes[i], "labels": labels[i]}]``) and returns the dict of losses; inference ignores
    them and returns the list of detections (a dict of boxes, scores and labels per image)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor, boxes: torch.Tensor, labels: torch.Tensor) -> Any:
        if self.training:
            targets = [{"boxes": boxes[i], "labels": labels[i]} for i in range(images.shape[0])]
            return self.model(list(images), targets)
        return self.model(list(images))


class FirstOutput(nn.Module):
    """A model returning a tuple (torchaudio's ``(output, lengths)``) with ``forward(*tensors)`` returning its
    first element: the lengths are an integer tensor (or None) that no loss reads. With ``head``, a linear layer
    from ``width`` features to ``head`` classes on top (an encoder whose last op is a LayerNorm has outputs whose
    mean, the default loss, does not depend on its inputs)."""

    def __init__(self, model: nn.Module, head: int = 0, width: int = 0) -> None:
        super().__init__()
        self.model = model
        self.head = nn.Linear(width, head) if head else nn.Identity()

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.model(*args)[0])
        return out

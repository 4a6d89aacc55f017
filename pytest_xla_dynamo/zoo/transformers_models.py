"""The transformers models of the zoo, as a table: built from a config class, random init, no download.

The seed's BERT_pytorch: a masked-LM BERT (``BertForMaskedLM`` from a ``BertConfig``, never
downloaded), standing in for torchbench's hand-written BERT_pytorch. Small tier: hidden 128,
2 layers, 2 heads, a 1000-word vocabulary, sequence length 32, batch 2; full tier: bert-base size
(hidden 768, 12 layers, 12 heads) with sequence length 128 and torchbench's batch 16.

Every model uses eager attention and is wrapped in :class:`MaskedLMLogits`, so that
``forward(input_ids)`` returns the logits tensor; its inputs are uniform random token ids.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_xla_dynamo.zoo.inputs import token_ids
from pytest_xla_dynamo.zoo.spec import SEED_COLLECTION, TIERS, ModelSpec, validate_tier
from pytest_xla_dynamo.zoo.table import Tolerance, make_spec, per_tier

if TYPE_CHECKING:
    import torch

SOURCE = "transformers"
REQUIRES = ("torch", "transformers")


class Row(NamedTuple):
    """One transformers model: its model and config classes and, per tier, config, sequence length, batch.

    The config dicts use the standard ``PretrainedConfig`` names (``vocab_size``, ``hidden_size``,
    ``num_hidden_layers``, ``num_attention_heads``), which the description quotes.
    """

    name: str
    model_class: str  # a transformers class, e.g. BertForMaskedLM
    config_class: str  # its config class, e.g. BertConfig
    config: tuple[Mapping[str, int], Mapping[str, int]]  # (small, full) keyword arguments of config_class
    seq_len: tuple[int, int]  # (small, full)
    batch: tuple[int, int]  # (small, full); full is torchbench's DEFAULT_TRAIN_BSIZE
    has_dropout: bool
    tolerance: Tolerance | None = None
    note: str = ""  # what the full tier stands for, shown in the description
    collection: str = SEED_COLLECTION


ROWS: tuple[Row, ...] = (
    # torchbench's BERT_pytorch: hidden 768, 12 layers, 12 heads, seq_len 128, a vocabulary of 20000
    # random "words" plus 5 special tokens; its positional embedding covers 512 positions.
    Row(
        "BERT_pytorch",
        "BertForMaskedLM",
        "BertConfig",
        config=(
            {
                "vocab_size": 1000,
                "hidden_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "intermediate_size": 512,
                "max_position_embeddings": 64,
            },
            {
                "vocab_size": 20005,
                "hidden_size": 768,
                "num_hidden_layers": 12,
                "num_attention_heads": 12,
                "intermediate_size": 3072,
                "max_position_embeddings": 512,
            },
        ),
        seq_len=(32, 128),
        batch=(2, 16),
        has_dropout=True,
        note="torchbench BERT_pytorch",
    ),
)


@cache
def _masked_lm_logits_class() -> type[torch.nn.Module]:
    import torch

    class MaskedLMLogits(torch.nn.Module):
        """Wraps a transformers masked LM so that ``forward(input_ids)`` returns the logits tensor."""

        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            logits: torch.Tensor = self.model(input_ids, return_dict=False)[0]
            return logits

    MaskedLMLogits.__module__ = __name__
    MaskedLMLogits.__qualname__ = "MaskedLMLogits"
    return MaskedLMLogits


def __getattr__(name: str) -> Any:
    # ``MaskedLMLogits`` is created on first use (it subclasses torch.nn.Module); exposing it as a
    # module attribute keeps wrapped models picklable.
    if name == "MaskedLMLogits":
        return _masked_lm_logits_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def from_config(
    model_class: str, config_class: str, config: Mapping[str, Mapping[str, int]]
) -> Callable[[str], torch.nn.Module]:
    """``build_model(tier)``: ``model_class(config_class(**config[tier]))`` with eager attention, logits out."""

    def build_model(tier: str) -> torch.nn.Module:
        kwargs: dict[str, Any] = dict(config[validate_tier(tier)])
        import transformers

        # explicit matmul/softmax/dropout attention, like torchbench's hand-written BERT_pytorch,
        # and the same decomposition on CPU and XLA (SDPA picks different kernels per device)
        kwargs["attn_implementation"] = "eager"
        cfg = getattr(transformers, config_class)(**kwargs)
        # NB: transformers' BertSelfAttention does not call its nn.Dropout module for the attention
        # probabilities: it reads ``self.dropout.p`` at run time and passes it to
        # ``nn.functional.dropout`` (``dropout=0.0 if not self.training else self.dropout.p``). A
        # patch that replaces Dropout modules must therefore keep a ``.p`` attribute (set it to 0.0
        # to really switch attention dropout off). timm's ViT attention does the same with
        # ``self.attn_drop.p`` when it uses fused SDPA.
        return _masked_lm_logits_class()(getattr(transformers, model_class)(cfg))

    return build_model


def _sizes(config: Mapping[str, int], seq_len: int, batch: int) -> str:
    return (
        f"hidden {config['hidden_size']}, {config['num_hidden_layers']} layers, "
        f"{config['num_attention_heads']} heads, vocab {config['vocab_size']}, seq {seq_len}, batch {batch}"
    )


def spec(row: Row) -> ModelSpec:
    """The :class:`ModelSpec` of one row."""
    config = per_tier(row.config)
    seq_len = per_tier(row.seq_len)
    batch = per_tier(row.batch)
    small, full = (_sizes(config[t], seq_len[t], batch[t]) for t in TIERS)
    note = f" ({row.note})" if row.note else ""
    return make_spec(
        row.name,
        SOURCE,
        build_model=from_config(row.model_class, row.config_class, config),
        build_inputs=token_ids({t: c["vocab_size"] for t, c in config.items()}, seq_len),
        batch=row.batch,
        has_dropout=row.has_dropout,
        tolerance=row.tolerance,
        requires=REQUIRES,
        description=(
            f"transformers {row.model_class} from a {row.config_class} (random init, eager attention, no "
            f"download), forward(input_ids) -> logits. small: {small}. full: {full}{note}."
        ),
        collection=row.collection,
    )


def specs() -> list[ModelSpec]:
    """The specs of :data:`ROWS`, in table order."""
    return [spec(row) for row in ROWS]

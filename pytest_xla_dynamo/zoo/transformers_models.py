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
    config: tuple[Mapping[str, Any], Mapping[str, Any]]  # (small, full) keyword arguments of config_class
    seq_len: tuple[int, int]  # (small, full)
    batch: tuple[int, int]  # (small, full); full is torchbench's DEFAULT_TRAIN_BSIZE
    has_dropout: bool
    tolerance: Tolerance | None = None
    note: str = ""  # what the full tier stands for, shown in the description
    collection: str = SEED_COLLECTION
    seq2seq: bool = False  # an encoder-decoder: the input ids are also the decoder's input ids


BROAD = "transformers"  # the broad collection of transformers families
SMALL_VOCAB = 1000
#: the full tier of a broad row: base-like sizes (the small tier's shape, widened)
_FULL = {"vocab_size": 32000}


def broad(model_class: str, config_class: str, small: Mapping[str, Any], full: Mapping[str, Any], *,
          name: str, seq2seq: bool = False, batch: int = 8) -> Row:
    """A row of the broad transformers collection, ``transformers.<name>``: small tier from ``small`` (a
    1000-word vocabulary, sequence 32, batch 2), full tier from ``full`` (sequence 128). Every dropout
    probability of ``small`` and ``full`` is 0: several families call ``F.dropout`` with them, which no
    module patch reaches."""
    return Row(f"{BROAD}.{name}", model_class, config_class,
               config=({"vocab_size": SMALL_VOCAB, **small}, {**_FULL, **full}), seq_len=(32, 128),
               batch=(2, batch), has_dropout=True, collection=BROAD, seq2seq=seq2seq)


# small decoder-only and encoder shapes: hidden 128, 2 layers, 4 heads (2 key-value heads where the family
# has grouped-query attention), feed-forward 256, 64 positions; full: hidden 768, 12 layers, 12 heads
_DEC_SMALL = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
              "max_position_embeddings": 64}
_DEC_FULL = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
             "max_position_embeddings": 512}
_GQA_SMALL = {**_DEC_SMALL, "num_key_value_heads": 2}
_GQA_FULL = {**_DEC_FULL, "num_key_value_heads": 4}
_ENC_DROP = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
_ENC_SMALL = {**_DEC_SMALL, **_ENC_DROP}  # the BERT-style encoders: the same shapes, dropout off
_ENC_FULL = {**_DEC_FULL, **_ENC_DROP}
_S2S_SMALL = {"d_model": 128, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
              "decoder_attention_heads": 4, "encoder_ffn_dim": 256, "decoder_ffn_dim": 256,
              "max_position_embeddings": 64, "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0}
_S2S_FULL = {"d_model": 768, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 12,
             "decoder_attention_heads": 12, "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072,
             "max_position_embeddings": 512, "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0}


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
    # --- the broad collection (--xla-zoo=transformers)
    # decoders
    broad("GPT2LMHeadModel", "GPT2Config",
          {"n_embd": 128, "n_layer": 2, "n_head": 4, "n_positions": 64, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
           "attn_pdrop": 0.0},
          {"n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
           "attn_pdrop": 0.0}, name="gpt2"),
    broad("LlamaForCausalLM", "LlamaConfig", _GQA_SMALL, _GQA_FULL, name="llama"),
    broad("MistralForCausalLM", "MistralConfig", _GQA_SMALL, _GQA_FULL, name="mistral"),
    broad("Qwen2ForCausalLM", "Qwen2Config", _GQA_SMALL, _GQA_FULL, name="qwen2"),
    broad("GemmaForCausalLM", "GemmaConfig", {**_GQA_SMALL, "head_dim": 32}, {**_GQA_FULL, "head_dim": 64},
          name="gemma"),
    broad("PhiForCausalLM", "PhiConfig", {**_DEC_SMALL, "resid_pdrop": 0.0, "embd_pdrop": 0.0},
          {**_DEC_FULL, "resid_pdrop": 0.0, "embd_pdrop": 0.0}, name="phi"),
    broad("OPTForCausalLM", "OPTConfig",
          {"hidden_size": 128, "ffn_dim": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
           "word_embed_proj_dim": 128, "max_position_embeddings": 64, "dropout": 0.0, "attention_dropout": 0.0},
          {"hidden_size": 768, "ffn_dim": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
           "word_embed_proj_dim": 768, "max_position_embeddings": 2048, "dropout": 0.0, "attention_dropout": 0.0},
          name="opt"),
    broad("GPTNeoForCausalLM", "GPTNeoConfig",
          {"hidden_size": 128, "num_layers": 2, "num_heads": 4, "attention_types": [[["global", "local"], 1]],
           "max_position_embeddings": 64, "window_size": 16, "embed_dropout": 0.0, "attention_dropout": 0.0,
           "resid_dropout": 0.0},
          {"hidden_size": 768, "num_layers": 12, "num_heads": 12, "attention_types": [[["global", "local"], 6]],
           "max_position_embeddings": 2048, "window_size": 256, "embed_dropout": 0.0, "attention_dropout": 0.0,
           "resid_dropout": 0.0}, name="gpt_neo"),
    broad("BloomForCausalLM", "BloomConfig",
          {"hidden_size": 128, "n_layer": 2, "n_head": 4, "hidden_dropout": 0.0, "attention_dropout": 0.0},
          {"hidden_size": 768, "n_layer": 12, "n_head": 12, "hidden_dropout": 0.0, "attention_dropout": 0.0},
          name="bloom"),
    # encoders
    broad("RobertaForMaskedLM", "RobertaConfig", {**_ENC_SMALL, "max_position_embeddings": 66},
          {**_ENC_FULL, "max_position_embeddings": 514}, name="roberta"),  # positions offset by the padding index
    broad("DistilBertForMaskedLM", "DistilBertConfig",
          {"dim": 128, "hidden_dim": 256, "n_layers": 2, "n_heads": 4, "max_position_embeddings": 64,
           "dropout": 0.0, "attention_dropout": 0.0},
          {"dim": 768, "hidden_dim": 3072, "n_layers": 6, "n_heads": 12, "max_position_embeddings": 512,
           "dropout": 0.0, "attention_dropout": 0.0}, name="distilbert"),
    broad("AlbertForMaskedLM", "AlbertConfig",
          {"embedding_size": 64, **_ENC_SMALL, "classifier_dropout_prob": 0.0},
          {"embedding_size": 128, **_ENC_FULL, "classifier_dropout_prob": 0.0}, name="albert"),
    broad("ElectraForMaskedLM", "ElectraConfig", {"embedding_size": 128, **_ENC_SMALL},
          {"embedding_size": 768, **_ENC_FULL}, name="electra"),
    broad("DebertaV2ForMaskedLM", "DebertaV2Config", _ENC_SMALL, _ENC_FULL, name="deberta_v2"),
    # encoder-decoders
    broad("T5ForConditionalGeneration", "T5Config",
          {"d_model": 128, "d_kv": 32, "d_ff": 256, "num_layers": 2, "num_heads": 4, "dropout_rate": 0.0,
           "decoder_start_token_id": 0},
          {"d_model": 768, "d_kv": 64, "d_ff": 3072, "num_layers": 12, "num_heads": 12, "dropout_rate": 0.0,
           "decoder_start_token_id": 0}, name="t5", seq2seq=True),
    broad("BartForConditionalGeneration", "BartConfig", _S2S_SMALL, _S2S_FULL, name="bart", seq2seq=True),
    broad("MBartForConditionalGeneration", "MBartConfig", _S2S_SMALL, _S2S_FULL, name="mbart", seq2seq=True),
    broad("PegasusForConditionalGeneration", "PegasusConfig", _S2S_SMALL, _S2S_FULL, name="pegasus",
          seq2seq=True),
    # more of pytorch's dynamo benchmark list (benchmarks/dynamo/huggingface_models_list.txt); XGLM left
    # out: its fp64 reference fails ("value cannot be converted to type float without overflow")
    broad("MegatronBertForCausalLM", "MegatronBertConfig", {**_ENC_SMALL, "is_decoder": True},
          {**_ENC_FULL, "is_decoder": True}, name="megatron_bert"),
    broad("MobileBertForMaskedLM", "MobileBertConfig",
          {**_ENC_SMALL, "intermediate_size": 128, "embedding_size": 64, "intra_bottleneck_size": 64,
           "classifier_dropout": 0.0},
          {"hidden_size": 512, "num_hidden_layers": 24, "num_attention_heads": 4, "intermediate_size": 512,
           "max_position_embeddings": 512, **_ENC_DROP, "classifier_dropout": 0.0}, name="mobilebert"),
    broad("LayoutLMForMaskedLM", "LayoutLMConfig", _ENC_SMALL, _ENC_FULL, name="layoutlm"),
    broad("ConvBertForMaskedLM", "ConvBertConfig", {**_ENC_SMALL, "embedding_size": 128},
          {**_ENC_FULL, "embedding_size": 768}, name="convbert"),
    broad("BlenderbotSmallForConditionalGeneration", "BlenderbotSmallConfig", _S2S_SMALL, _S2S_FULL,
          name="blenderbot_small", seq2seq=True),
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
            if getattr(self, "seq2seq", False):  # an encoder-decoder: the ids feed the decoder too
                out = self.model(input_ids, decoder_input_ids=input_ids, return_dict=False)
            else:
                out = self.model(input_ids, return_dict=False)
            logits: torch.Tensor = out[0]
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
    model_class: str, config_class: str, config: Mapping[str, Mapping[str, Any]], seq2seq: bool = False
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
        wrapped = _masked_lm_logits_class()(getattr(transformers, model_class)(cfg))
        object.__setattr__(wrapped, "seq2seq", seq2seq)  # a plain attribute, read by forward
        return wrapped

    return build_model


def _first(config: Mapping[str, Any], *names: str) -> Any:
    return next((config[n] for n in names if n in config), "?")


def _sizes(config: Mapping[str, Any], seq_len: int, batch: int) -> str:
    hidden = _first(config, "hidden_size", "n_embd", "d_model", "dim")
    layers = _first(config, "num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers")
    heads = _first(config, "num_attention_heads", "n_head", "num_heads", "n_heads", "encoder_attention_heads")
    vocab = config["vocab_size"]
    return f"hidden {hidden}, {layers} layers, {heads} heads, vocab {vocab}, seq {seq_len}, batch {batch}"


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
        build_model=from_config(row.model_class, row.config_class, config, row.seq2seq),
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

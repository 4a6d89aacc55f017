"""The mixture-of-experts models of the ``moe`` collection: transformers decoders with top-k routing.

Rows of :mod:`transformers_models` (built from a config, eager attention, ``forward(input_ids)`` ->
logits), in the collection ``moe``. Small: the broad transformers decoders' shape (hidden 128, 2 layers,
4 heads, 2 key-value heads, sequence 32, a 1000-word vocabulary, batch 2) with 4 experts of width 64-256
and 2 routed a token, the experts as batched matmuls
(``experts_implementation='batched_mm'``); full: hidden 768, 12 layers, 8 experts (2 a token), sequence 128, batch 8.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_xla_dynamo.zoo.spec import ModelSpec
from pytest_xla_dynamo.zoo.transformers_models import _GQA_FULL, _GQA_SMALL, SMALL_VOCAB, Row, spec

SOURCE = "transformers"
REQUIRES = ("torch", "transformers")
COLLECTION = "moe"
#: the experts as one batched matmul over each token's gathered expert weights (static shapes); transformers'
#: default ``grouped_mm`` fails both references here: ``torch._grouped_mm`` has no float64 kernel (the fp64
#: reference: "Expected mat_a to be Float32, BFloat16 or Float16 matrix, got Double") and its token counts per
#: expert (``histc`` of int routing ids) fall back to a CPU kernel that has no int implementation on XLA
_EXPERTS = {"experts_implementation": "batched_mm"}


def _row(name: str, model_class: str, config_class: str, small: Mapping[str, Any], full: Mapping[str, Any]) -> Row:
    return Row(f"{COLLECTION}.{name}", model_class, config_class,
               config=({**_GQA_SMALL, "vocab_size": SMALL_VOCAB, **_EXPERTS, **small},
                       {**_GQA_FULL, "vocab_size": 32000, **_EXPERTS, **full}),
               seq_len=(32, 128), batch=(2, 8), has_dropout=True, collection=COLLECTION)


ROWS: tuple[Row, ...] = (
    _row("mixtral", "MixtralForCausalLM", "MixtralConfig",
         {"num_local_experts": 4, "num_experts_per_tok": 2}, {"num_local_experts": 8, "num_experts_per_tok": 2}),
    _row("qwen2_moe", "Qwen2MoeForCausalLM", "Qwen2MoeConfig",
         {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
          "shared_expert_intermediate_size": 128},
         {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 768,
          "shared_expert_intermediate_size": 3072}),
    _row("olmoe", "OlmoeForCausalLM", "OlmoeConfig",
         {"num_experts": 4, "num_experts_per_tok": 2, "eos_token_id": 2, "pad_token_id": 1},
         {"num_experts": 8, "num_experts_per_tok": 2}),
)


def specs() -> list[ModelSpec]:
    """The specs of :data:`ROWS`, in table order."""
    return [spec(row) for row in ROWS]

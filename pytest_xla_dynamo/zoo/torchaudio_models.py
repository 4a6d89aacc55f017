"""The torchaudio models of the ``speech`` collection: ``torchaudio.models`` built from configs.

Random init, no download (no pretrained bundle). Models that return ``(output, lengths)`` sit behind
:class:`nets.FirstOutput`; the two encoders (Conformer, Emformer) get a 32-class linear head there, as an ASR
model puts on them (their last op is a LayerNorm, whose outputs' mean, the default loss, is constant). Inputs
are standard-normal: raw waveforms (wav2vec2, WavLM: ``batch x samples``; Conv-TasNet: ``batch x 1 x
samples``), feature frames with their lengths (Conformer, Emformer: ``batch x frames x features`` and int64
lengths, every sequence full), a spectrogram (DeepSpeech: ``batch x 1 x frames x features``) or MFCCs
(Wav2Letter: ``batch x 13 x frames``).

Small tier (a compile of seconds on XLA:CPU): wav2vec2 and WavLM with a 7-layer convolutional feature
extractor of 32 channels (the base strides: 320 samples a frame), 2 encoder layers of width 64, 4 heads, on
4000 samples (12 frames); Conformer and Emformer with 2 layers of width 64, 4 heads, 64 and 32 frames;
DeepSpeech with hidden 128 on 50 frames of 40 features; Wav2Letter as torchaudio defines it (no width knob,
23M parameters) on 100 MFCC frames; Conv-TasNet with 64 encoder filters and 2 stacks of 3 blocks on 4000
samples. Batch 2. Full tier: the published base shapes (wav2vec2_base, wavlm_base, Conformer-S (144 wide,
16 layers), emformer_rnnt_base's transcriber, DeepSpeech's hidden 2048, conv_tasnet_base) on 1 s of 16 kHz
audio or 100-400 frames, batch 32 (torchbench has none of these models).

Dropout: rates that a functional call reads (attention dropout of every model here, DeepSpeech's and the
Conformer's and Emformer's dropout) are 0 at both tiers, as for the broad transformers; wav2vec2's and WavLM's
``nn.Dropout`` modules keep the base rates (0.1) and their layer drop (0.1, ``torch.rand(1).item()`` per layer
in training) too: ``has_dropout=True``, and the parity suites' ``dropout_to_identity`` patch switches both off
(:func:`pytest_xla_dynamo.core.patches.is_layer_drop`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.zoo.family import Row
from pytest_xla_dynamo.zoo.family import specs as _specs
from pytest_xla_dynamo.zoo.spec import ModelSpec

if TYPE_CHECKING:
    import torch

SOURCE = "torchaudio"
REQUIRES = ("torch", "torchaudio")
FAMILY = "speech"


def audio_model(tier: str, *, name: str, first_output: bool = False, head: int = 0, **kw: Any) -> torch.nn.Module:
    """``torchaudio.models.<name>(**kw)``, behind :class:`nets.FirstOutput` where it returns a tuple (with a linear
    ``head`` over ``input_dim`` features where given)."""
    import torchaudio.models

    from pytest_xla_dynamo.zoo import nets

    model: torch.nn.Module = getattr(torchaudio.models, name)(**kw)
    return nets.FirstOutput(model, head, kw.get("input_dim", 0)) if first_output else model


def waveforms(tier: str, batch: int, *, samples: int, channel: bool = False) -> tuple[torch.Tensor, ...]:
    """Standard-normal audio, ``batch x samples`` (``batch x 1 x samples`` with ``channel``)."""
    import torch

    return (torch.randn(batch, 1, samples) if channel else torch.randn(batch, samples),)


def frames(tier: str, batch: int, *, frames: int, features: int, lengths: bool = False,
           layout: str = "btf") -> tuple[torch.Tensor, ...]:
    """Standard-normal feature frames in ``layout`` (``btf``: ``batch x frames x features``; ``bctf``: with a
    channel of 1; ``bft``: features first), and with ``lengths`` an int64 length per sequence (all full)."""
    import torch

    shapes = {"btf": (batch, frames, features), "bctf": (batch, 1, frames, features), "bft": (batch, features, frames)}
    x = torch.randn(*shapes[layout])
    return (x, torch.full((batch,), frames, dtype=torch.int64)) if lengths else (x,)


# wav2vec2's convolutional feature extractor: (channels, kernel, stride) per layer; the base strides, 32 wide
_EXTRACTOR_SMALL = [(32, 10, 5)] + [(32, 3, 2)] * 4 + [(32, 2, 2)] * 2
_EXTRACTOR_FULL = [(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2
_DROP = {"encoder_projection_dropout": 0.1, "encoder_attention_dropout": 0.0, "encoder_ff_interm_dropout": 0.1,
         "encoder_dropout": 0.1, "encoder_layer_drop": 0.1}
_W2V_SMALL = {"first_output": True, "extractor_mode": "group_norm", "extractor_conv_layer_config": _EXTRACTOR_SMALL,
              "extractor_conv_bias": False, "encoder_embed_dim": 64, "encoder_pos_conv_kernel": 16,
              "encoder_pos_conv_groups": 4, "encoder_num_layers": 2, "encoder_num_heads": 4,
              "encoder_ff_interm_features": 128, "encoder_layer_norm_first": False, "aux_num_out": 32, **_DROP}
_W2V_FULL = {"first_output": True, "extractor_mode": "group_norm", "extractor_conv_layer_config": _EXTRACTOR_FULL,
             "extractor_conv_bias": False, "encoder_embed_dim": 768, "encoder_pos_conv_kernel": 128,
             "encoder_pos_conv_groups": 16, "encoder_num_layers": 12, "encoder_num_heads": 12,
             "encoder_ff_interm_features": 3072, "encoder_layer_norm_first": False, "aux_num_out": 32, **_DROP}
_AUDIO = ({"samples": 4000}, {"samples": 16000})


def _row(name: str, model: tuple[dict[str, Any], dict[str, Any]], inputs: Any, data: tuple[dict[str, Any], ...],
         has_dropout: bool, description: str) -> Row:
    return Row(FAMILY, name, SOURCE, REQUIRES, audio_model, model, inputs, (data[0], data[1]), (2, 32),
               has_dropout, description)


# the two encoders behind FirstOutput with a 32-class head; small: width 64, 2 layers, 4 heads
_ENCODER = {"first_output": True, "head": 32}
_CONFORMER = ({**_ENCODER, "name": "Conformer", "input_dim": 64, "num_heads": 4, "ffn_dim": 128, "num_layers": 2,
               "depthwise_conv_kernel_size": 15},
              {**_ENCODER, "name": "Conformer", "input_dim": 144, "num_heads": 4, "ffn_dim": 576, "num_layers": 16,
               "depthwise_conv_kernel_size": 31})
_EMFORMER = ({**_ENCODER, "name": "Emformer", "input_dim": 64, "num_heads": 4, "ffn_dim": 128, "num_layers": 2,
              "segment_length": 8, "left_context_length": 8, "right_context_length": 2, "max_memory_size": 4},
             {**_ENCODER, "name": "Emformer", "input_dim": 512, "num_heads": 8, "ffn_dim": 2048, "num_layers": 20,
              "segment_length": 16, "left_context_length": 32, "right_context_length": 4, "max_memory_size": 0})
_TASNET = {"name": "ConvTasNet", "num_sources": 2, "enc_kernel_size": 16, "msk_kernel_size": 3}

ROWS: tuple[Row, ...] = (
    _row("wav2vec2", ({"name": "wav2vec2_model", **_W2V_SMALL}, {"name": "wav2vec2_model", **_W2V_FULL}),
         waveforms, _AUDIO, True,
         "torchaudio.models.wav2vec2_model with a 32-class CTC head, forward(waveforms) -> frame logits."),
    _row("wavlm", ({"name": "wavlm_model", **_W2V_SMALL, "encoder_num_buckets": 32, "encoder_max_distance": 128},
                   {"name": "wavlm_model", **_W2V_FULL, "encoder_num_buckets": 320, "encoder_max_distance": 800}),
         waveforms, _AUDIO, True,
         "torchaudio.models.wavlm_model (gated relative position bias) with a 32-class CTC head, "
         "forward(waveforms) -> frame logits."),
    _row("conformer", _CONFORMER, frames,
         ({"frames": 64, "features": 64, "lengths": True}, {"frames": 400, "features": 144, "lengths": True}), False,
         "torchaudio.models.Conformer, forward(frames, lengths) -> frame logits (a 32-class linear head)."),
    _row("emformer", _EMFORMER, frames,
         ({"frames": 34, "features": 64, "lengths": True}, {"frames": 404, "features": 512, "lengths": True}), False,
         "torchaudio.models.Emformer (training forward: segments, memory bank, right context), "
         "forward(frames, lengths) -> frame logits (a 32-class linear head)."),
    _row("deepspeech", ({"name": "DeepSpeech", "n_feature": 40, "n_hidden": 128, "n_class": 29},
                        {"name": "DeepSpeech", "n_feature": 161, "n_hidden": 2048, "n_class": 29}),
         frames, ({"frames": 50, "features": 40, "layout": "bctf"}, {"frames": 400, "features": 161, "layout": "bctf"}),
         False, "torchaudio.models.DeepSpeech (a bidirectional ReLU nn.RNN), forward(spectrogram) -> log-probs."),
    _row("wav2letter", ({"name": "Wav2Letter", "num_classes": 40, "input_type": "mfcc", "num_features": 13},) * 2,
         frames, ({"frames": 100, "features": 13, "layout": "bft"}, {"frames": 400, "features": 13, "layout": "bft"}),
         False, "torchaudio.models.Wav2Letter on MFCCs, forward(mfcc) -> log-probabilities per frame."),
    _row("conv_tasnet",
         ({**_TASNET, "enc_num_feats": 64, "msk_num_feats": 32, "msk_num_hidden_feats": 64, "msk_num_layers": 3,
           "msk_num_stacks": 2},
          {**_TASNET, "enc_num_feats": 512, "msk_num_feats": 128, "msk_num_hidden_feats": 512, "msk_num_layers": 8,
           "msk_num_stacks": 3}),
         waveforms, ({"samples": 4000, "channel": True}, {"samples": 16000, "channel": True}),
         False, "torchaudio.models.ConvTasNet (2 sources), forward(mixture) -> separated sources."),
)


def specs() -> list[ModelSpec]:
    """The specs of :data:`ROWS`, in table order."""
    return _specs(ROWS)

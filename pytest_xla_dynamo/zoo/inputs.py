"""Example inputs: the input factories the model tables use, and :func:`randomize_inputs`.

Each factory returns a ``build_inputs(tier, batch_size)`` function of a :class:`ModelSpec`; torch
is imported when it is called, never at import time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.zoo.spec import validate_tier

if TYPE_CHECKING:
    import torch

InputBuilder = Callable[[str, int], tuple["torch.Tensor", ...]]


def images(resolution: Mapping[str, int]) -> InputBuilder:
    """Standard-normal RGB images, ``batch x 3 x res x res`` with ``res = resolution[tier]``."""

    def build_inputs(tier: str, batch_size: int) -> tuple[torch.Tensor, ...]:
        res = resolution[validate_tier(tier)]
        import torch

        return (torch.randn(batch_size, 3, res, res),)

    return build_inputs


def token_ids(vocab_size: Mapping[str, int], seq_len: Mapping[str, int]) -> InputBuilder:
    """Uniform int64 token ids in ``[0, vocab_size[tier])``, ``batch x seq_len[tier]``."""

    def build_inputs(tier: str, batch_size: int) -> tuple[torch.Tensor, ...]:
        tier = validate_tier(tier)
        import torch

        ids = torch.randint(0, vocab_size[tier], (batch_size, seq_len[tier]), dtype=torch.int64)
        return (ids,)

    return build_inputs


def randomize_inputs(inputs: Any, seed: int) -> tuple[Any, ...]:
    """Fresh random values for the floating inputs, like the torchbench harness's ``--randomize-input``.

    Floating tensors are replaced by standard-normal tensors of the same shape, dtype, device and
    ``requires_grad`` (``torch.randn_like``'s semantics, drawn from a CPU generator seeded with
    ``seed`` so the values do not depend on the device or the global RNG); integer and bool
    tensors (token ids, labels, lengths) are kept as they are, since perturbing them would break
    invariants between inputs. Lists and tuples are walked recursively; other values pass
    through unchanged. The top level is returned as a tuple.
    """
    import torch

    gen = torch.Generator(device="cpu")
    gen.manual_seed(int(seed))

    def walk(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            if x.is_floating_point():
                fresh = torch.randn(x.shape, generator=gen, dtype=x.dtype, device="cpu").to(x.device)
                return fresh.requires_grad_(x.requires_grad)
            return x
        if isinstance(x, (list, tuple)):
            return type(x)(walk(v) for v in x)
        return x

    if isinstance(inputs, (list, tuple)):
        return tuple(walk(v) for v in inputs)
    return (walk(inputs),)

"""References that can arbitrate: eager's fast paths off, and whether eager's fast path explains a failure.

Eager CPU takes fast paths that XLA never takes and that change results where a model treats positions as
undefined: ``nn.TransformerEncoder`` in eval with a ``src_key_padding_mask`` runs on nested tensors and writes
0 at padded rows (XLA computes them), and ``scaled_dot_product_attention`` picks a fused kernel. An fp64
reference on the same fast path cannot decide between eager and the backend. :func:`plain_math` switches
them off (``torch.backends.mha.set_fastpath_enabled(False)``, SDPA on its math kernel) for the references'
steps; :func:`check_fast_path` runs a case's first step on CPU eager both ways and says where the two paths
disagree, so that a failure they explain is called eager's, not the backend's.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.parity.compare import Divergence, Tolerance, compare_step

if TYPE_CHECKING:
    import torch

#: what :func:`plain_math` switches off, as a verdict names it
FAST_PATHS = ("the nested-tensor fast path of nn.TransformerEncoder / MultiheadAttention "
              "(torch.backends.mha fast path)", "fused scaled_dot_product_attention kernels (math kernel instead)")


_entered = [0]  # how many times plain_math() was entered in this process (see entered())


def entered() -> int:
    """How many times :func:`plain_math` was entered in this process: a caller that counts before and after a
    parity run knows whether its references ran on the plain path (then eager's fast path explains nothing)."""
    return _entered[0]


@contextlib.contextmanager
def plain_math() -> Iterator[None]:
    """Eager's fast paths off while the block runs (restored after, also when it raises): the ``nn.MultiheadAttention``
    / ``nn.TransformerEncoder(Layer)`` fast path with its nested tensors, and fused SDPA kernels (math only).

    Wrap every step of the eager and fp64 references (and nothing of the backend's run): a generator's step
    runs inside ``with plain_math(): next(steps)``.
    """
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    _entered[0] += 1
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with sdpa_kernel([SDPBackend.MATH]):
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def _plain(fn: Callable[[], Any], plain: bool) -> Any:
    with plain_math() if plain else contextlib.nullcontext():
        return fn()


def first_step(model: torch.nn.Module, inputs: Sequence[torch.Tensor], mode: str,
               loss: Callable[[Any], torch.Tensor], plain: bool) -> dict[str, torch.Tensor]:
    """One CPU eager step of a copy of ``model`` (training: forward, loss and backward, no optimizer step; inference:
    a forward under no_grad), its tensors named as parity names them, on eager's fast paths or (``plain``) off them."""
    import torch

    from pytest_xla_dynamo.core.cases import collect

    model = copy.deepcopy(model)
    model.train(mode == "train")

    def run() -> dict[str, torch.Tensor]:
        if mode != "train":
            with torch.no_grad():
                return collect(model, model(*inputs), None, mode)
        out = model(*inputs)
        value = loss(out)
        value.backward()
        return collect(model, out, value, mode)

    return _plain(run, plain)


@dataclass
class FastPathCheck:
    """Eager's first step on its fast paths against the plain math path: the tensors where they disagree."""

    divergences: list[Divergence] = field(default_factory=list)
    compared: int = 0
    error: str = ""  # the check itself failed (reported, never raised)

    @property
    def differs(self) -> bool:
        return bool(self.divergences)

    @property
    def tensors(self) -> list[str]:
        return list(dict.fromkeys(d.tensor for d in self.divergences))

    def explains(self, diverging: Sequence[str]) -> bool:
        """Whether the fast path's difference explains a backend's failure: the backend's first diverging
        tensor is one where eager's two paths disagree."""
        return bool(diverging) and diverging[0] in self.tensors

    def verdict(self) -> list[str]:
        """The verdict's lines for a failure it explains."""
        worst = max(self.divergences, key=lambda d: d.max_abs_err if d.max_abs_err == d.max_abs_err else 0.0)
        return [f"the difference is eager's, not the backend's: eager's fast path and its plain math path "
                f"disagree ({len(self.tensors)} of {self.compared} tensors of step 1; largest: {worst.problem})",
                "fast paths: " + "; ".join(FAST_PATHS) + ". The references should run on the plain path "
                "(parity.plain_math); XLA never takes the fast path"]


def check_fast_path(model: torch.nn.Module, inputs: Sequence[torch.Tensor], mode: str,
                    loss: Callable[[Any], torch.Tensor], tol: Tolerance) -> FastPathCheck:
    """Run the first step on CPU eager on its fast paths and on the plain math path (:func:`plain_math`) and
    compare every tensor with ``tol`` (the plain path as the reference)."""
    try:
        fast = first_step(model, inputs, mode, loss, plain=False)
        plain = first_step(model, inputs, mode, loss, plain=True)
    except Exception as exc:  # the check is a diagnosis: its failure is reported, the case's own stays
        return FastPathCheck(error=f"{type(exc).__name__}: {str(exc).strip()[:200]}")
    return FastPathCheck(compare_step(1, plain, fast, None, tol), len(plain))

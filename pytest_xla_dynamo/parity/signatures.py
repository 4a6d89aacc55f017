"""Known mechanisms with an exact signature: a passing case where one is at work says so.

A registry entry may name a ``signature`` (:data:`~pytest_xla_dynamo.known_issues.registry.SIGNATURES`): a test of
a parity run's tensors that holds exactly where the entry's mechanism is at work, however small its effect. A case
whose error stays under the tolerance passes, and its message, its record's ``notes`` and its parity cell say
``known issue <id> present below tolerance (<where>: <what>)``.

``running_var_ratio`` (``local:xla-batchnorm-biased-running-var``): XLA's BatchNorm updates ``running_var`` in
training with the biased batch variance. From the same running_var ``r`` (step 1 starts from the initial state on
both sides), with momentum ``m`` and ``n`` elements per channel, eager's new running_var is ``(1-m) r + m var
n/(n-1)``, XLA's ``(1-m) r + m var``: the backend's increment ``new - (1-m) r`` over eager's is ``(n-1)/n`` exactly,
for every channel, an integer ``n`` that the ratio pins. Rounding moves the ratio by about 1e-6, so ``n`` is pinned
up to a few hundred elements per channel (a small batch, where the bias is largest); beyond that the signature
decides nothing and says nothing.

:class:`Observed` is what a parity run keeps for the checks (each BatchNorm's running_var before and after step 1,
a few floats per channel); :data:`CHECKS` maps a signature's name to its check; :func:`present` gives the notes of
the registry's entries whose signature holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_xla_dynamo.known_issues.registry import SIGNATURES, KnownIssue

if TYPE_CHECKING:
    import torch

#: float32's machine epsilon: the running_vars are float32, so an increment ``new - (1-m) r`` carries their rounding
EPSILON = 2.0**-23
#: the relative difference of the batch variance itself that eager's and the backend's kernels may show
VARIANCE_ROUNDING = 1e-5


@dataclass(frozen=True)
class Sighting:
    """A signature found: ``where`` (a buffer) and ``detail`` (``ratio 0.98750 = 79/80``)."""

    where: str
    detail: str

    def text(self) -> str:
        return f"{self.where}: {self.detail}"


@dataclass
class RunningVar:
    """One BatchNorm's running_var: its momentum, its value before step 1 and after it on eager and the backend."""

    buffer: str  # its name in the model (``conv.bn.running_var``)
    momentum: float
    initial: torch.Tensor
    eager: torch.Tensor | None = None
    backend: torch.Tensor | None = None


@dataclass
class Observed:
    """What a training parity run keeps for the signatures (:func:`observe`, then :meth:`record` each step)."""

    running_vars: list[RunningVar] = field(default_factory=list)

    def record(self, step: int, eager: Mapping[str, torch.Tensor], backend: Mapping[str, torch.Tensor]) -> None:
        """Keep step 1's running_vars of eager's and the backend's step (a step's tensors by name)."""
        if step != 1:
            return
        for rv in self.running_vars:
            name = f"buffer {rv.buffer}"
            if name in eager and name in backend:
                rv.eager, rv.backend = eager[name].double(), backend[name].double()


def observe(model: torch.nn.Module, initial_state: Mapping[str, torch.Tensor], mode: str) -> Observed:
    """The running_vars of ``model``'s BatchNorm layers that track running statistics with a momentum, their
    values in ``initial_state`` (what step 1 starts from); nothing in inference."""
    import torch

    found = Observed()
    if mode != "train":
        return found
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.modules.batchnorm._BatchNorm) or not module.track_running_stats:
            continue
        buffer = f"{name}.running_var" if name else "running_var"
        if module.momentum is None or getattr(module, "running_var", None) is None or buffer not in initial_state:
            continue
        found.running_vars.append(RunningVar(buffer, float(module.momentum),
                                             initial_state[buffer].detach().to("cpu", torch.float64, copy=True)))
    return found


def running_var_ratio_of(initial: torch.Tensor, eager: torch.Tensor, backend: torch.Tensor,
                         momentum: float) -> tuple[float, int] | None:
    """``(ratio, n)`` where the backend's running_var increment over eager's is ``(n-1)/n`` for one integer ``n``
    (see the module docstring); None where it is not, or where rounding cannot pin ``n``.

    The layer's ratio (the increments summed over its channels) must lie within the increments' rounding (float32
    running_vars, :data:`EPSILON`, and the batch variance's, :data:`VARIANCE_ROUNDING`) of ``(n-1)/n``, and within
    a quarter of the gap to ``n/(n+1)``, so that ``n`` is pinned; every channel's ratio within its own rounding."""
    import torch

    if not 0 < momentum <= 1 or not (initial.shape == eager.shape == backend.shape) or not initial.numel():
        return None
    initial, eager, backend = initial.double(), eager.double(), backend.double()
    keep = 1 - momentum
    inc_e, inc_b = eager - keep * initial, backend - keep * initial
    if not bool(torch.isfinite(inc_e).all() & torch.isfinite(inc_b).all()):
        return None
    total = float(inc_e.sum())
    if total <= 0:
        return None
    ratio = float(inc_b.sum()) / total
    if not 0.0 < ratio < 1.0:
        return None
    n = round(1 / (1 - ratio))
    if n < 2:
        return None
    exact = (n - 1) / n
    # each increment's rounding: its two float32 terms, and the batch variance's own
    slack = 2 * EPSILON * (eager.abs() + backend.abs() + 2 * keep * initial.abs()) + VARIANCE_ROUNDING * inc_e.abs()
    if abs(ratio - exact) > min(float(slack.sum()) / total, 0.25 / (n * (n + 1))):
        return None
    judged = inc_e > 0
    if not bool(judged.any()) or bool(((inc_b - exact * inc_e).abs() > slack)[judged].any()):
        return None
    return ratio, n


def running_var_ratio(observed: Observed) -> list[Sighting]:
    """The running_vars whose step-1 update is the biased one (``local:xla-batchnorm-biased-running-var``)."""
    found = []
    for rv in observed.running_vars:
        if rv.eager is None or rv.backend is None:
            continue
        got = running_var_ratio_of(rv.initial, rv.eager, rv.backend, rv.momentum)
        if got is not None:
            ratio, n = got
            found.append(Sighting(rv.buffer, f"ratio {ratio:.5f} = {n - 1}/{n}"))
    return found


#: a signature's name (a registry entry's ``signature``) -> its check
CHECKS: dict[str, Callable[[Observed], list[Sighting]]] = {"running_var_ratio": running_var_ratio}
assert set(CHECKS) == set(SIGNATURES), "a signature the registry accepts has no check here"


def note(entry: KnownIssue, sightings: list[Sighting]) -> str:
    """``known issue <id> present below tolerance (bn.running_var: ratio 0.98750 = 79/80, +1 more)``."""
    more = f", +{len(sightings) - 1} more" if len(sightings) > 1 else ""
    return f"known issue {entry.id} present below tolerance ({sightings[0].text()}{more})"


def present(entries: Iterable[KnownIssue], observed: Observed | None, backend: str, mode: str) -> list[str]:
    """The notes of the entries with a ``signature`` that holds in ``observed`` (a passing case's run), for the
    entries whose ``backends`` and ``modes`` admit the case. Nothing where no entry has a signature."""
    if observed is None:
        return []
    notes = []
    for entry in entries:
        if not entry.signature or not entry.admits(backend, mode):
            continue
        sightings = CHECKS[entry.signature](observed)
        if sightings:
            notes.append(note(entry, sightings))
    return notes


__all__ = ["CHECKS", "Observed", "RunningVar", "Sighting", "note", "observe", "present", "running_var_ratio",
           "running_var_ratio_of"]

"""Ill-conditioning recognized: does a few activations' sign flip explain a gradient or later-step divergence?

A ReLU's (LeakyReLU's, PReLU's, ReLU6's) gradient jumps at zero. A pre-activation within rounding of zero lands
on either side by chance (which side depends on the CPU's kernels), and one flipped element in a million changes
whole weight gradients, which per-tensor parity then calls a divergence. The causal check, generalized from
``suites/test_known_issue_causes.py`` (registry entry ``local:activation-sign-flip-grads``):

1. the step in question is rerun from eager's weights at its start on CPU eager, its fp64 copy and the backend,
   with a forward pre-hook on every kinked activation module that keeps a copy of its input;
2. the flips are the elements whose input is positive on one side and not on the other (fp64 vs the backend);
3. the fp64 step is run again with exactly those inputs' signs flipped (the value changes sign, its gradient
   passes unchanged);
4. the tensors of the step (loss, outputs, gradients, parameters) beyond twice eager's error from fp64 are counted
   against the plain fp64 and against the flipped one: when some are beyond the first and none the second, the
   flips explain the divergence and the case is ill-conditioned there, not a backend bug.

Only few flips count (:data:`MAX_FLIPS`): many sign changes are a real divergence of the activations. Like the
localization, the rerun starts from eager's weights, so it sees what the backend does from there; the report says
what the rerun saw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.core.cases import PreparedCase, collect
from pytest_xla_dynamo.core.engine import CaseEngine
from pytest_xla_dynamo.core.stages import DIAGNOSIS_FAILED, diagnosis_failed
from pytest_xla_dynamo.parity.compare import Tolerance, compare_step
from pytest_xla_dynamo.parity.localize import fresh_compile, keep, start_of_step
from pytest_xla_dynamo.parity.plain_math import plain_math

if TYPE_CHECKING:
    import torch

PHASE = "conditioning check"
MECHANISM = "local:activation-sign-flip-grads"  # the registry's entries of this mechanism (and its :zoo cases)
KINKED = ("ReLU", "LeakyReLU", "PReLU", "ReLU6", "RReLU")  # activation modules whose gradient jumps at zero
MAX_FLIPS = 64  # more sign changes than this are a divergence of the activations, not rounding
FACTOR = 2.0  # same()'s multiplier: a tensor is beyond when its error is over FACTOR x eager's (plus tol / 10)
FlipSet = dict[str, list[tuple[int, ...]]]  # activation call -> flipped element indices
NO_FLIP = "no activation input changes side"  # the note of a check that found no flip (it disproves the mechanism)


class Activations:
    """Forward pre-hooks on every kinked activation module of ``model``: keep each call's input, and (``flips``)
    change the sign of the given elements of it (the value flips, its gradient passes unchanged)."""

    def __init__(self, model: torch.nn.Module, flips: FlipSet | None = None) -> None:
        self.inputs: list[tuple[str, torch.Tensor]] = []
        self.types: dict[str, str] = {}  # activation call -> its module's type
        self.flips = flips or {}
        self._calls: dict[str, int] = {}
        self.handles = [module.register_forward_pre_hook(self._hook(name)) for name, module in model.named_modules()
                        if name and type(module).__name__ in KINKED]

    def _hook(self, name: str) -> Any:
        import torch

        def hook(module: torch.nn.Module, args: tuple[Any, ...]) -> Any:
            if not args or not isinstance(args[0], torch.Tensor):
                return None
            self._calls[name] = self._calls.get(name, 0) + 1
            call = name if self._calls[name] == 1 else f"{name}#{self._calls[name]}"
            self.types[call] = type(module).__name__
            x = args[0]
            self.inputs.append((call, keep(x)))
            where = self.flips.get(call)
            if not where:
                return None
            delta = torch.zeros_like(x)
            for index in where:
                delta[index] = -2 * x[index].detach()
            return (x + delta, *args[1:])

        return hook

    def clear(self) -> None:
        """Forget the calls kept so far (the next forward's are numbered from its first call)."""
        self.inputs.clear()
        self._calls.clear()

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def run_step(case: PreparedCase, step: int, flips: FlipSet | None = None,
             types: dict[str, str] | None = None) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """One step of ``case`` from its initial weights with the pre-hooks: its tensors and the activations' inputs,
    on CPU (``types``, when given, gets each activation call's module type)."""
    acts = Activations(case.model, flips)
    if case.backend.dynamo_backend is not None:
        case.fn = fresh_compile(case.model, case.backend)  # a compile with the hooks traced in
    case.reset()
    case.phase, case.step_index = PHASE, step
    try:
        out, loss = case.step()
    finally:
        acts.remove()
    tensors = collect(case.model, out, loss, case.mode)
    inputs = {call: x.detach().to("cpu", copy=True) for call, x in acts.inputs}
    if types is not None:
        types.update(acts.types)
    return tensors, inputs


@dataclass
class Conditioning:
    """What the causal check found (see the module docstring)."""

    step: int
    flips: FlipSet = field(default_factory=dict)
    fp64_values: list[tuple[str, tuple[int, ...], float, float]] = field(default_factory=list)  # call, index, fp64, res
    beyond_fp64: list[str] = field(default_factory=list)  # tensors beyond FACTOR x eager's error from fp64
    beyond_flipped: list[str] = field(default_factory=list)  # ... from fp64 with the flips
    compared: int = 0
    activations: int = 0  # activation elements compared
    note: str = ""  # why it could not decide (no flip, too many, not reproduced, failed)
    types: dict[str, str] = field(default_factory=dict)  # activation call -> module type
    # the case's diverging tensors of the step that the rerun from eager's weights diverges at too, by the case's
    # tolerance (None: not compared); empty: the step diverges only from the backend's own earlier state
    rerun_diverging: list[str] | None = None

    @property
    def disproves(self) -> bool:
        """The check ran and found the flips do not explain the divergence (none at all, or still beyond with
        them flipped): the sign-flip mechanism is not its cause."""
        if self.note:  # only "no flip at all" decides; the other notes say why the check could not
            return self.note.startswith(NO_FLIP)
        return not self.explains  # it ran to the end: flips, a divergence, and still beyond with them flipped

    @property
    def failed(self) -> bool:
        """The check itself raised: nothing is decided, and no rule may pick the mechanism's entries in its place."""
        return self.note.startswith(DIAGNOSIS_FAILED)

    @property
    def flip_count(self) -> int:
        return sum(len(v) for v in self.flips.values())

    @property
    def explains(self) -> bool:
        return not self.note and bool(self.beyond_fp64) and not self.beyond_flipped and 0 < self.flip_count

    def flips_text(self, limit: int = 3) -> str:
        shown = [f"{call}{f' ({self.types[call]})' if call in self.types else ''} input {list(index)}: "
                 f"fp64 {x64:.2e}, backend {xb:.2e}"
                 for call, index, x64, xb in self.fp64_values[:limit]]
        more = f", +{len(self.fp64_values) - limit} more" if len(self.fp64_values) > limit else ""
        return "; ".join(shown) + more

    def lines(self, backend: str) -> list[str]:
        """The verdict (when the flips explain it) or the check's outcome, as lines."""
        if self.explains:
            n = self.flip_count
            return [f"ill-conditioned, not a backend bug: {n} activation input{'s' * (n != 1)} within rounding of "
                    f"zero land{'s' * (n == 1)} on the other side on {backend} than in fp64 at step {self.step} "
                    f"({self.flips_text()})",
                    f"the fp64 step with {'that sign' if n == 1 else 'those signs'} flipped gives {backend}'s tensors: "
                    f"0 of {self.compared} beyond {FACTOR:g}x eager's error from it, {len(self.beyond_fp64)} against "
                    f"the plain fp64 ({', '.join(self.beyond_fp64[:3])}"
                    f"{', ...' if len(self.beyond_fp64) > 3 else ''}); see local:activation-sign-flip-grads"]
        if self.failed:
            return [self.note]
        return [f"activation sign flips checked at step {self.step}: " + (self.note or (
            f"{self.flip_count} flip(s) ({self.flips_text()}); with them flipped in fp64 still beyond: "
            f"{', '.join(self.beyond_flipped[:4])}"))]


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    import torch

    if a.shape != b.shape or not a.is_floating_point():
        return math.inf if a.shape != b.shape else 0.0
    return float(torch.sqrt(torch.mean(torch.square(a.double() - b.double()))))


def _beyond(res: dict[str, torch.Tensor], eager: dict[str, torch.Tensor], fp64: dict[str, torch.Tensor],
            ref: dict[str, torch.Tensor], tol: Tolerance) -> list[str]:
    """The floating tensors whose error from ``ref`` is over FACTOR x eager's error from ``fp64`` (plus tol / 10)."""
    out = []
    for name, r in res.items():
        if name in eager and name in ref and r.is_floating_point() and not name.startswith("buffer "):
            if _rmse(r, ref[name]) > FACTOR * _rmse(eager[name], fp64[name]) + tol.tol / 10:
                out.append(name)
    return out


def find_flips(fp64: dict[str, torch.Tensor], res: dict[str, torch.Tensor]) -> tuple[FlipSet, list[Any], int]:
    """Elements on the other side of zero (``x > 0`` differs), per activation call both runs made."""
    flips: FlipSet = {}
    values: list[tuple[str, tuple[int, ...], float, float]] = []
    compared = 0
    for call, x64 in fp64.items():
        xb = res.get(call)
        if xb is None or xb.shape != x64.shape:
            continue
        compared += x64.numel()
        where = ((x64 > 0) != (xb > 0)).nonzero().tolist()
        if where:
            flips[call] = [tuple(i) for i in where]
            values += [(call, tuple(i), float(x64[tuple(i)]), float(xb[tuple(i)])) for i in where[:MAX_FLIPS + 1]]
    return flips, values, compared


def _same_shapes(res: dict[str, torch.Tensor], eager: dict[str, torch.Tensor]) -> None:
    """Raise where the hooked rerun's tensors are not shaped like eager's: the compiled graph with the hooks
    returned other tensors than the model's, and nothing it computed can be compared."""
    for name, t in res.items():
        if name in eager and tuple(t.shape) != tuple(eager[name].shape):
            raise RuntimeError(f"the hooked rerun's {name} has shape {list(t.shape)} where eager's has "
                               f"{list(eager[name].shape)} (the graph with the hooks returned another tensor)")


def check_conditioning(engine: CaseEngine, spec: zoo.ModelSpec, backend: Backend, mode: str, tol: Tolerance,
                       step: int, patches: Sequence[str] = (), diverging: Sequence[str] = ()) -> Conditioning:
    """The causal check at ``step`` (see the module docstring); never raises (a failure is its ``note``).
    ``diverging``: the case's diverging tensors at ``step``, compared in the rerun too (``rerun_diverging``)."""
    try:
        return _check(engine, spec, backend, mode, tol, step, patches, diverging)
    except Exception as exc:  # a diagnosis: its failure is reported, the case's own stays
        return Conditioning(step, note=diagnosis_failed(f"activation sign-flip check at step {step}", exc))


def _check(engine: CaseEngine, spec: zoo.ModelSpec, backend: Backend, mode: str, tol: Tolerance, step: int,
           patches: Sequence[str], diverging: Sequence[str] = ()) -> Conditioning:
    with plain_math():
        key, model, inputs, fp64_model, fp64_inputs = start_of_step(engine, spec, mode, step, patches)
        eager, _ = run_step(PreparedCase(key, spec, engine.eager, model, inputs), step)
        found = Conditioning(step)
        fp64, x64 = run_step(PreparedCase(key, spec, engine.eager, fp64_model, fp64_inputs), step, None, found.types)
    res_case = PreparedCase(engine.key(spec, backend, mode, patches), spec, backend, model, inputs)
    res, xb = run_step(res_case, step)
    del res_case
    _same_shapes(res, eager)
    if diverging:
        found.rerun_diverging = [d.tensor for d in compare_step(step, eager, res, fp64, tol) if d.tensor in diverging]
    found.flips, found.fp64_values, found.activations = find_flips(x64, xb)
    found.beyond_fp64 = _beyond(res, eager, fp64, fp64, tol)
    found.compared = len([n for n, t in res.items() if t.is_floating_point() and not n.startswith("buffer ")])
    if not x64:
        found.note = "the model has no ReLU-like activation module to check"
    elif not found.flip_count:
        found.note = f"{NO_FLIP} ({found.activations} elements compared)"
    elif found.flip_count > MAX_FLIPS:
        found.note = (f"{found.flip_count} activation inputs change side: more than rounding near zero "
                      f"(at most {MAX_FLIPS} count)")
    elif not found.beyond_fp64:
        found.note = (f"the rerun from eager's weights does not diverge beyond {FACTOR:g}x eager's error "
                      f"({found.flip_count} flip(s): {found.flips_text()})")
    if found.note:
        return found
    with plain_math():
        flipped, _ = run_step(PreparedCase(key, spec, engine.eager, fp64_model, fp64_inputs), step, found.flips)
    found.beyond_flipped = _beyond(res, eager, fp64, flipped, tol)
    return found

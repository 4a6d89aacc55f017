"""Amplification of earlier rounding: a divergence that appears only from the backend's own earlier state.

A training step ``k`` can diverge although nothing in it is wrong on the backend: the backend's weights after step
``k-1`` differ from eager's by rounding (within the tolerance), and step ``k`` amplifies that difference (a ReLU
input near zero lands on the other side, an ill-conditioned loss). The evidence, for the first divergence the
registry does not explain, at a step ``k > 1``:

1. the conditioning check's rerun of step ``k`` from eager's weights at its start
   (:func:`pytest_xla_dynamo.parity.conditioning.check_conditioning`, its ``rerun_diverging``) matches eager on
   every tensor that diverged in the run, by the case's tolerance;
2. nothing the registry does not explain diverged before step ``k`` in the run;
3. the backend's own run, rerun here with forward pre-hooks on the kinked activations, has weights within the
   tolerance of eager's after step ``k-1`` (the largest error is named), and its step ``k`` is compared
   with eager's: the activation inputs on the other side of zero (the flips) and the tensors that diverge again.

Then the verdict is ``amplification of earlier rounding``, and no new upstream issue is proposed: the backend
computes step ``k`` from the same weights as eager does. :class:`Amplification` holds the figures;
:meth:`Amplification.holds` decides, on them alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.core.cases import PreparedCase, collect
from pytest_xla_dynamo.core.engine import CaseEngine
from pytest_xla_dynamo.core.stages import DIAGNOSIS_FAILED, diagnosis_failed
from pytest_xla_dynamo.parity.compare import Tolerance, compare_tensor, max_abs_err
from pytest_xla_dynamo.parity.conditioning import Activations, find_flips, run_step
from pytest_xla_dynamo.parity.localize import fresh_compile, start_of_step
from pytest_xla_dynamo.parity.plain_math import plain_math

if TYPE_CHECKING:
    import torch

PHASE = "amplification check"
CLASSIFICATION = "amplified_rounding"  # the triage's classification of the verdict


@dataclass
class Amplification:
    """What the check found at ``step`` (see the module docstring); ``holds`` decides on these figures alone."""

    step: int
    rerun_diverging: list[str] | None  # the step's diverging tensors that the rerun from eager's weights diverges at
    earlier: list[str] = field(default_factory=list)  # unexplained divergences of the run before the step
    state_tensor: str = ""  # the backend's own weight farthest from eager's after step - 1
    state_error: float = math.nan  # its max abs err
    state_beyond: list[str] = field(default_factory=list)  # own weights beyond the tolerance after step - 1
    flips: int | None = None  # activation inputs on the other side of zero, own step vs eager's (None: no activation)
    activations: int = 0  # activation elements compared
    again: list[str] = field(default_factory=list)  # the step's diverging tensors that diverge again in the own rerun
    diverging: list[str] = field(default_factory=list)  # the step's diverging tensors in the run
    note: str = ""  # why it did not run to the end (a failed diagnosis)

    @property
    def failed(self) -> bool:
        return self.note.startswith(DIAGNOSIS_FAILED)

    @property
    def holds(self) -> bool:
        """Step > 1, the rerun from eager's weights matches, nothing unexplained diverged before, and the backend's
        own state after the step before is within the tolerance."""
        return (not self.note and self.step > 1 and self.rerun_diverging == [] and not self.earlier
                and not self.state_beyond)

    def flips_text(self) -> str:
        if self.flips is None:
            return "no ReLU-like activation to flip"
        return f"{self.flips} activation sign flip{'s' * (self.flips != 1)} (of {self.activations} inputs)"

    def lines(self, backend: str) -> list[str]:
        """The verdict (when it holds), else what the check found, as lines."""
        k = self.step
        if self.holds:
            err = "?" if math.isnan(self.state_error) else f"{self.state_error:.1e}"
            where = f", {self.state_tensor}" if self.state_tensor else ""
            again = (f"; its own rerun diverges again at {len(self.again)} of {len(self.diverging)}"
                     if self.diverging else "")
            return [f"amplification of earlier rounding: step {k} diverges only from the backend's own step {k - 1} "
                    f"state (within tolerance at step {k - 1}: err {err}{where}); {self.flips_text()}",
                    f"({backend} computes step {k} from eager's step-{k - 1} weights within tolerance on every tensor "
                    f"that diverged{again}): not a backend bug, and no new issue"]
        if self.note:
            return [self.note]
        why = []
        if self.rerun_diverging:
            why.append(f"the rerun from eager's weights diverges too ({', '.join(self.rerun_diverging[:3])})")
        if self.earlier:
            why.append(f"divergences before step {k} ({', '.join(self.earlier[:3])})")
        if self.state_beyond:
            why.append(f"the backend's own state after step {k - 1} is beyond the tolerance "
                       f"({', '.join(self.state_beyond[:3])})")
        return [f"amplification of earlier rounding checked at step {k}: not it: " + "; ".join(why or ["step 1"])]


def check_amplification(engine: CaseEngine, spec: zoo.ModelSpec, backend: Backend, mode: str, tol: Tolerance,
                        step: int, rerun_diverging: list[str] | None, earlier: Sequence[str],
                        diverging: Sequence[str], patches: Sequence[str] = ()) -> Amplification:
    """The check at ``step`` (see the module docstring): ``rerun_diverging`` from the conditioning check,
    ``earlier`` the run's unexplained divergences before the step, ``diverging`` its diverging tensors at the step.
    The backend's own run is rerun only where the rest already holds. Never raises (a failure is its ``note``)."""
    found = Amplification(step, rerun_diverging, list(earlier), diverging=list(diverging))
    if step < 2 or rerun_diverging != [] or found.earlier:
        return found
    try:
        _own_run(engine, spec, backend, mode, tol, found, patches)
    except Exception as exc:  # a diagnosis: its failure is reported, the case's own stays
        found.note = diagnosis_failed(f"amplification check at step {step}", exc)
    return found


def _own_run(engine: CaseEngine, spec: zoo.ModelSpec, backend: Backend, mode: str, tol: Tolerance,
             found: Amplification, patches: Sequence[str]) -> None:
    """Eager's step from its own weights, and the backend's steps from the initial weights with the pre-hooks: the
    state after the step before compared, then the step's activation inputs and tensors."""
    step = found.step
    with plain_math():
        key, model, inputs, _, _ = start_of_step(engine, spec, mode, step, patches)
        eager, x_eager = run_step(PreparedCase(key, spec, engine.eager, model, inputs), step)
        initial, _ = engine.build(key, spec)
    case = PreparedCase(engine.key(spec, backend, mode, patches), spec, backend, initial, inputs)
    acts = Activations(case.model)
    try:
        if backend.dynamo_backend is not None:
            case.fn = fresh_compile(case.model, backend)  # a compile with the hooks traced in
        case.reset()
        for index in range(1, step + 1):
            if index == step:
                _compare_state(model, case.model, tol, found)
                acts.clear()
            case.phase, case.step_index = PHASE, index
            out, loss = case.step()
        own = collect(case.model, out, loss, case.mode)
        x_own = {call: x.detach().to("cpu", copy=True) for call, x in acts.inputs}
    finally:
        acts.remove()
    if x_eager:
        flips, _, found.activations = find_flips(x_eager, x_own)
        found.flips = sum(len(v) for v in flips.values())
    found.again = [name for name in found.diverging if name in own and name in eager
                   and compare_tensor(name, eager[name], own[name], None, tol) is not None]


def _compare_state(eager_model: torch.nn.Module, own_model: torch.nn.Module, tol: Tolerance,
                   found: Amplification) -> None:
    """The backend's own weights before the step against eager's: the farthest, and those beyond the tolerance
    (buffers are not weighed: a training step reads none but BatchNorm's batch statistics, computed anew)."""
    mine = dict(own_model.named_parameters())
    theirs = dict(eager_model.named_parameters())
    worst, worst_name = -1.0, ""
    for name, ref in theirs.items():
        res = mine.get(name)
        if res is None:
            continue
        res_cpu = res.detach().to("cpu", copy=True)
        err = max_abs_err(ref.detach(), res_cpu)
        if not math.isnan(err) and err > worst:
            worst, worst_name = err, f"param {name}"
        if compare_tensor(name, ref.detach(), res_cpu, None, tol) is not None:
            found.state_beyond.append(f"param {name}")
    if worst >= 0:
        found.state_error, found.state_tensor = worst, worst_name

"""The seed's graph-size diagnosis, run on a failing case: does cutting the graph like trace_once explain it?

pytorch PR #88449 found that vgg16 and alexnet trained to different parameters under trace once and
trace everytime, and that a ``torch_xla.sync()`` after the forward in trace everytime made the two
agree: XLA optimizes one big graph per step differently from trace once's forward, backward and
optimizer graphs. Here the failing training case is rerun on ``trace_everytime_split`` (lazy tensors,
synced after the forward and after the backward: trace_once's graph cuts without dynamo) and the
verdict says which shape agrees with eager:

* ``trace_everytime`` fails, the split run passes: one graph per step explains it;
* ``trace_once`` fails and the split run fails alike: the same cuts reproduce it without dynamo (XLA's
  handling of those graphs, not dynamo's capture);
* ``trace_once`` fails, the split run passes: graph shape does not explain it (dynamo's graphs differ);
* ``trace_everytime`` fails and the split run too: graph shape does not explain it.
"""

from __future__ import annotations

import math

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.core.engine import CaseEngine
from pytest_xla_dynamo.core.stages import diagnosis_failed
from pytest_xla_dynamo.parity.compare import Tolerance
from pytest_xla_dynamo.parity.run import ParityResult, run

SPLIT = "trace_everytime_split"
DIAGNOSED = ("trace_once", "trace_everytime")


def _first(result: ParityResult) -> str:
    if result.status != "fail_accuracy" or not result.divergences:
        return result.status
    d = result.divergences[0]
    err = "" if math.isnan(d.max_abs_err) else f", max abs err {d.max_abs_err:.1e}"
    return f"fail_accuracy (step {d.step}, {d.tensor}{err}; {len(result.divergences)} diverging)"


def verdict(backend: str, failing: ParityResult, split: ParityResult) -> str:
    """The diagnosis sentence for ``failing`` (on ``backend``) given the split run's result."""
    if split.status not in ("pass", "fail_accuracy"):
        first = (split.message.splitlines() or [""])[0][:150]
        return f"cannot tell: {SPLIT} did not run ({split.status}: {first})"
    split_fails = split.status == "fail_accuracy"
    same_first = (split_fails and bool(failing.divergences) and bool(split.divergences)
                  and split.divergences[0].tensor == failing.divergences[0].tensor)
    if backend == "trace_everytime":
        if not split_fails:
            return ("graph shape explains it: cut like trace_once's graphs (a sync after the forward and the "
                    "backward) the lazy steps match eager; as one graph per step they diverge")
        return "graph shape does not explain it: the lazy steps diverge cut like trace_once's graphs too"
    if split_fails:
        alike = "the same first tensor" if same_first else "a different first tensor"
        return (f"the same cuts reproduce it without dynamo ({alike}): XLA's handling of those graphs, "
                "not dynamo's capture")
    return ("graph shape does not explain it: lazy steps cut at trace_once's graph boundaries match eager, "
            "so trace_once's own graphs differ")


def diagnose(engine: CaseEngine, spec: zoo.ModelSpec, backend: Backend, mode: str, tol: Tolerance,
             failing: ParityResult) -> list[str]:
    """The diagnosis lines of a failing training case on trace_once or trace_everytime (else none)."""
    if mode != "train" or backend.name not in DIAGNOSED or SPLIT not in engine.backends:
        return []
    try:
        split = run(engine, spec, engine.backends.get(SPLIT), mode, tol, shared=False, steps=failing.steps or None)
    except Exception as exc:  # a failed diagnosis is reported, the case's own failure stays
        return [diagnosis_failed("graph split", exc, limit=150)]
    worst = failing.divergences[0].max_abs_err if failing.divergences else math.nan
    near = ""
    if not math.isnan(worst) and tol.atol is None:
        near = f"; the first divergence is {worst / tol.tol:.3g}x the tolerance"
    return [verdict(backend.name, failing, split),
            f"({backend.name}: {_first(failing)}; {SPLIT}: {_first(split)}{near})"]

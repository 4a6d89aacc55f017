"""One op case run in the op server's process: an OpInfo entry's samples on CPU eager, CPU fp64 and a backend.

A case is ``(op, backend, direction)``. ``forward`` compares the op's outputs for float32 samples and for the
integer and bool dtypes the entry lists; ``backward`` compares the gradients of ``sum(output * cotangent)``
(a seeded random cotangent, so that ops whose gradient of a plain sum vanishes, softmax's, are still checked)
with respect to every floating-point input that requires grad. ``trace_everytime`` runs the op on lazy tensors
and syncs once; ``trace_once`` runs it through ``torch.compile`` (``openxla_eval`` forward, ``openxla``
backward). A sample fails as parity does (:func:`~pytest_xla_dynamo.parity.compare.compare_tensor`: allclose,
else ``same()``'s rule against fp64); integer and bool outputs are exact. What an op defines only up to chance
(a random sample, detected by eager's answer changing with the seed) or up to order (indices of equal keys) is compared
where it is defined (:mod:`.checks`). The result is plain data (:class:`CaseResult`'s dict) for the client.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.ops import checks, samples
from pytest_xla_dynamo.ops.repro import Reproducer

if TYPE_CHECKING:
    import torch

FORWARD, BACKWARD = "forward", "backward"
#: samples of an entry checked per dtype: float32, then the other dtypes (forward only)
MAX_FLOAT_SAMPLES = 4
MAX_OTHER_SAMPLES = 2
#: seeds a sample of an op the database marks as random is tried under before it is taken as deterministic
RANDOM_TRIES = 8
#: the backends a case runs on, and the dynamo backend of trace_once by direction
COMPILED = {FORWARD: "openxla_eval", BACKWARD: "openxla"}


@dataclass
class SampleOutcome:
    """What one sample did on the backend: ``problem`` empty when it matched."""

    index: int
    dtype: str
    kind: str  # "pass" | "fail_accuracy" | "fail_to_run" | "eager_fail" | "not_differentiable"
    problem: str = ""
    fallbacks: dict[str, int] = field(default_factory=dict)
    graphs: int = 0
    note: str = ""
    repro: str = ""
    compiles: int = 0  # XLA compilations of the backend's run
    compile_seconds: float = 0.0
    random: bool = False  # eager's answer changes with the seed: compared by statistics


@dataclass
class CaseResult:
    """A case's status and what it rests on; travels to the client as a dict."""

    status: str
    message: str
    samples: list[SampleOutcome]
    fallbacks: dict[str, int]
    graphs: int
    notes: list[str]
    repro: str = ""
    compiles: int = 0
    compile_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_op(op_id: str) -> Any:
    """The OpInfo entry of ``op_id`` (``name`` or ``name.variant``); KeyError names the id."""
    from pytest_xla_dynamo.ops.catalog import op_entries

    entries = op_entries()
    if op_id not in entries:
        raise KeyError(f"no OpInfo entry {op_id!r} in this torch's op_db")
    return entries[op_id]


def sample_dtypes(op: Any, direction: str) -> list[torch.dtype]:
    """float32 (where supported), and for forward one integer dtype and bool where the entry lists them."""
    import torch

    from pytest_xla_dynamo.ops.catalog import differentiable

    supported = op.supported_dtypes("cpu")
    if direction == BACKWARD:
        return [torch.float32] if differentiable(op) else []
    found = [torch.float32] if torch.float32 in supported else []
    integer = next((d for d in (torch.int64, torch.int32) if d in supported), None)
    return found + ([integer] if integer is not None else []) + ([torch.bool] if torch.bool in supported else [])


def samples_of(op: Any, direction: str, seed: int) -> Iterator[tuple[int, Any]]:
    """``(index, sample)`` pairs: the entry's samples for each of :func:`sample_dtypes`, seeded, capped."""
    import torch

    index = 0
    for dtype in sample_dtypes(op, direction):
        cap = MAX_FLOAT_SAMPLES if dtype == torch.float32 else MAX_OTHER_SAMPLES
        torch.manual_seed(seed)
        grad = direction == BACKWARD
        for taken, sample in enumerate(op.sample_inputs("cpu", dtype, requires_grad=grad)):
            if taken >= cap:
                break
            yield index, sample
            index += 1


class CaseRunner:
    """Runs cases of one process; ``device`` is the XLA device, ``scratch`` where a sample's reproducer is
    written before the backend runs it (so that a crash leaves it behind), ``repro_dir`` where failing
    samples' reproducers are kept (None: not kept)."""

    def __init__(self, device: torch.device, scratch: Path, repro_dir: Path | None = None) -> None:
        self.device = device
        self.scratch = scratch
        self.repro_dir = repro_dir

    def run(self, op_id: str, backend: str, direction: str, seed: int) -> CaseResult:
        op = find_op(op_id)
        outcomes = [self._sample(op, op_id, backend, direction, index, sample, seed)
                    for index, sample in samples_of(op, direction, seed)]
        return summarize(outcomes, backend)

    def _sample(self, op: Any, op_id: str, backend: str, direction: str, index: int, sample: Any,
                seed: int) -> SampleOutcome:
        leaves = samples.call_of(None, sample).leaves
        dtype = str(leaves[0].dtype).removeprefix("torch.") if leaves else "?"
        run = _runner(op, direction, seed + index)
        try:
            eager = run(sample, "cpu", None)
        except Exception as exc:  # eager itself rejects the sample: nothing to compare
            return SampleOutcome(index, dtype, "eager_fail", f"eager raised {type(exc).__name__}: {_first(exc)}")
        if eager is None:
            return SampleOutcome(index, dtype, "not_differentiable", "no output requires grad")
        random = self._is_random(op, direction, sample, seed + index, eager)
        repro = Reproducer(op_id, op, sample, backend, direction, seed + index, index)
        self.scratch.write_text(repro.source())
        from pytest_xla_dynamo.core import metrics

        before = metrics.snapshot()
        try:
            got: list[Any] | None = run(sample, self.device, COMPILED[direction] if backend == "trace_once" else None)
        except Exception as exc:
            return self._failed(SampleOutcome(index, dtype, "fail_to_run", _error(exc)), repro)
        delta = metrics.snapshot().delta(before)
        graphs = delta.dynamo.get("stats", {}).get("unique_graphs", 0)
        outcome = SampleOutcome(index, dtype, "pass", fallbacks=delta.fallbacks, graphs=graphs,
                                compiles=delta.compiles, compile_seconds=delta.seconds.get("CompileTime", 0.0),
                                random=random)
        if got is None:
            outcome.kind, outcome.problem = "fail_accuracy", "no output of the backend requires grad (eager's do)"
            return self._failed(outcome, repro)
        fp64 = _fp64(run, sample, op)
        what = "output" if direction == FORWARD else "grad"
        problem, note = checks.compare_all(op_id, sample, what, eager, got, fp64, random)
        outcome.note = note
        if problem:
            outcome.kind, outcome.problem = "fail_accuracy", problem
            return self._failed(outcome, repro)
        return outcome

    def _failed(self, outcome: SampleOutcome, repro: Reproducer) -> SampleOutcome:
        if self.repro_dir is not None:
            outcome.repro = str(repro.write(self.repro_dir))
        return outcome

    @staticmethod
    def _is_random(op: Any, direction: str, sample: Any, seed: int, eager: list[Any]) -> bool:
        """Whether the sample draws random numbers: eager under another seed gives another answer (a dropout
        sample with p = 0 or training off does not, and is compared element by element). An op the database
        marks as random (its callable goes through ``wrapper_set_seed``) is tried under :data:`RANDOM_TRIES`
        seeds, so that a draw with few outcomes (dropout3d of one channel) is not taken for a deterministic one."""
        tries = RANDOM_TRIES if "wrapper_set_seed" in getattr(getattr(op.op, "__code__", None), "co_names", ()) else 1
        for k in range(1, tries + 1):
            try:
                other = _runner(op, direction, seed, rng_seed=seed + 7919 * k)(sample, "cpu", None)
            except Exception:
                return False
            if other is not None and not checks.same_values(eager, other):
                return True
        return False


def _runner(op: Any, direction: str, seed: int, rng_seed: int | None = None
            ) -> Callable[[Any, Any, str | None], list[Any] | None]:
    """A function running ``sample`` on a device (compiled with a dynamo backend, or not): the outputs (forward)
    or the gradients (backward, None where no output requires grad), as CPU tensors in a list."""

    def run(sample: Any, device: Any, compiled: str | None) -> list[Any] | None:
        import torch

        torch.manual_seed(seed if rng_seed is None else rng_seed)
        if str(device) != "cpu":
            import torch_xla

            torch_xla.manual_seed(seed if rng_seed is None else rng_seed)
        call = samples.call_of(op.op, sample, device)
        leaves = samples.moved(call.leaves, device)
        fn = call.fn
        if compiled is not None:
            import torch._dynamo

            torch._dynamo.reset()
            fn = torch.compile(call.fn, backend=compiled, dynamic=False)
        outputs = samples.tensors(fn(*leaves))
        if direction == BACKWARD:
            return samples.gradients(outputs, leaves, seed, device)
        return samples.to_cpu(outputs, device)

    return run


def _fp64(run: Callable[[Any, Any, str | None], list[Any] | None], sample: Any, op: Any) -> list[Any] | None:
    """The fp64 reference of a float32 sample (None where the op has no float64 or it raises)."""
    import torch

    if torch.float64 not in op.supported_dtypes("cpu"):
        return None
    try:
        return run(samples.as_fp64(sample), "cpu", None)
    except Exception:
        return None


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def _error(exc: BaseException) -> str:
    """An exception as one line, with where in torch/torch_xla it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames)), "")
    return f"{type(exc).__name__}: {_first(exc)}" + (f" (at {where})" if where else "")


#: the order in which a sample's outcome decides a case's status
PRIORITY = ("fail_to_run", "fail_accuracy")


def summarize(outcomes: list[SampleOutcome], backend: str) -> CaseResult:
    """:func:`judge`'s result with the XLA compilations of all samples added up."""
    result = judge(outcomes, backend)
    result.compiles = sum(o.compiles for o in outcomes)
    result.compile_seconds = round(sum(o.compile_seconds for o in outcomes), 3)
    return result


def judge(outcomes: list[SampleOutcome], backend: str) -> CaseResult:
    """A case's status from its samples: the first failing kind (by :data:`PRIORITY`), else ``cpu_fallback``
    where aten ops ran on the CPU, else ``pass_not_captured`` where dynamo compiled no graph, else pass."""
    fallbacks: dict[str, int] = {}
    for o in outcomes:
        for name, count in o.fallbacks.items():
            fallbacks[name] = fallbacks.get(name, 0) + count
    graphs = sum(o.graphs for o in outcomes)
    compared = [o for o in outcomes if o.kind not in ("eager_fail", "not_differentiable")]
    notes = sorted({o.note for o in outcomes if o.note})
    if any(o.random for o in outcomes):
        notes.insert(0, "random samples: compared by shape, finiteness and mean, not element by element")
    for kind in PRIORITY:
        bad = [o for o in compared if o.kind == kind]
        if bad:
            lines = [f"sample {o.index} ({o.dtype}): {o.problem}" for o in bad]
            return CaseResult(kind, f"{len(bad)} of {len(compared)} samples: " + "; ".join(lines), outcomes,
                              fallbacks, graphs, notes, bad[0].repro)
    if not compared:
        why = "; ".join(f"sample {o.index}: {o.problem}" for o in outcomes[:3]) or "the entry has no sample"
        status = "eager_fail_to_run" if any(o.kind == "eager_fail" for o in outcomes) else "pass_due_to_skip"
        return CaseResult(status, f"no sample compared: {why}", outcomes, fallbacks, graphs, notes)
    said = f"{len(compared)} samples match eager"
    if fallbacks:
        names = ", ".join(f"{k} ({v})" for k, v in sorted(fallbacks.items()))
        return CaseResult("cpu_fallback", f"{said}, but ran on the CPU: {names}", outcomes, fallbacks, graphs, notes)
    if backend == "trace_once" and graphs == 0:
        return CaseResult("pass_not_captured", f"{said}, but dynamo compiled no graph", outcomes, fallbacks,
                          graphs, notes)
    return CaseResult("pass", said, outcomes, fallbacks, graphs, notes)


"""Prepared cases: a model built, placed, wrapped and warmed up once per (model, backend, mode) and process.

A :class:`PreparedCase` holds the model on its backend's device, the wrapped (compiled) callable,
its optimizer and inputs, the initial weights, and the figures of its warm-up (the first compile):
the parity, graph and timing suites share it, so each case compiles once per process. Before each
use :meth:`PreparedCase.reset` reloads the initial weights in place, which keeps the compiled graphs
valid (same tensors, same shapes). The cache keeps the cases of one model at a time: the plugin
orders shared-case tests model by model, so memory stays bounded.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core import metrics, patches
from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.core.devices import seed_everything
from pytest_xla_dynamo.core.stages import stage

if TYPE_CHECKING:
    import torch

WARMUP_STEPS = 2  # steps run (and measured) as warm-up: the first compiles happen here
LEARNING_RATE = 0.01
TensorSet = dict[str, "torch.Tensor"]


@dataclass(frozen=True)
class CaseKey:
    model: str
    backend: str
    mode: str
    tier: str
    seed: int
    patches: tuple[str, ...]
    randomize_input: bool


@dataclass
class Warmup:
    """What the first steps of a case did: seconds per step, and counter deltas."""

    step_seconds: list[float] = field(default_factory=list)
    per_step: list[metrics.Snapshot] = field(default_factory=list)

    @property
    def total(self) -> metrics.Snapshot:
        out = metrics.Snapshot()
        for snap in self.per_step:
            out = out + snap
        return out

    def figures(self, backend: Backend) -> dict[str, int | None]:
        """The graph figures of the warm-up, the one definition used by timing, graphs and reports:
        dynamo's (None where the backend does not use dynamo) and the XLA compilations (None off XLA).

        ``graph_breaks`` counts every break, ``unique_graph_breaks`` the distinct reasons once addresses
        and folders are cleaned out (:func:`metrics.clean_reason`); ``compiles`` sums each step's
        :attr:`metrics.Snapshot.compiles`.
        """
        total = self.total
        uses_dynamo = backend.dynamo_backend is not None
        stats = total.dynamo.get("stats", {})
        breaks = total.clean_graph_breaks
        return {
            "unique_graphs": int(stats.get("unique_graphs", 0)) if uses_dynamo else None,
            "calls_captured": int(stats.get("calls_captured", 0)) if uses_dynamo else None,
            "graph_breaks": int(sum(breaks.values())) if uses_dynamo else None,
            "unique_graph_breaks": len(breaks) if uses_dynamo else None,
            "compiles": sum(s.compiles for s in self.per_step) if backend.is_xla else None,
        }


def build_model(spec: zoo.ModelSpec, tier: str, seed: int, patch_names: Sequence[str]) -> torch.nn.Module:
    """A fresh CPU model, initialised from ``seed``, with ``patch_names`` applied to its instance."""
    import torch

    torch.manual_seed(seed)
    with patches.apply_patches(patch_names):  # class level while building
        model = spec.build_model(tier)
    if patch_names:
        stack = contextlib.ExitStack()  # the instance-level swap is permanent for a case's own model
        patches.patch_module(model, patch_names, stack)
        stack.pop_all()
    return model


def build_inputs(spec: zoo.ModelSpec, tier: str, seed: int, randomize: bool) -> tuple[torch.Tensor, ...]:
    import torch

    torch.manual_seed(seed + 1)
    inputs = spec.build_inputs(tier, spec.batch(tier))
    if randomize:
        inputs = zoo.randomize_inputs(inputs, seed)
    return tuple(inputs)


def place(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``model.to(device)``, keeping tied weights tied.

    Moving to XLA makes new Parameter objects (torch_xla overwrites module params on conversion),
    which unties shared weights such as BERT's decoder and word embeddings: re-tie them here.
    """
    groups: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    model = model.to(device)
    for names in groups.values():
        if len(names) < 2:
            continue
        first = model.get_parameter(names[0])
        for name in names[1:]:
            owner_name, _, attr = name.rpartition(".")
            owner = model.get_submodule(owner_name) if owner_name else model
            if getattr(owner, attr) is not first:
                setattr(owner, attr, first)
    return model


class PreparedCase:
    """One model on one backend in one mode, ready to step."""

    def __init__(self, key: CaseKey, spec: zoo.ModelSpec, backend: Backend, cpu_model: torch.nn.Module,
                 cpu_inputs: Sequence[torch.Tensor], dtype: torch.dtype | None = None) -> None:
        """``cpu_model`` is copied, never stepped: its state is the case's initial state, shared, not
        copied (the cases and references of one model hold one CPU copy of its initial weights, and
        must not change it). ``dtype``: the case's floating-point type (the fp64 reference), its initial
        state converted on each :meth:`reset`."""
        import torch

        self.key = key
        self.spec = spec
        self.backend = backend
        self.mode = key.mode
        self.phase = ""  # what the steps are for (warm-up, parity, ...): named in a failure's stage
        self.step_index: int | None = None
        with stage("place", backend=backend.name):
            self.device = backend.device()
            model = copy.deepcopy(cpu_model)
            self.model = place(model.to(dtype) if dtype is not None else model, self.device)
        self.model.train(self.mode == "train")
        # copies (on the CPU too): the inputs are shared with the model's other cases
        self.inputs = tuple((t.to(dtype) if dtype is not None and t.is_floating_point() else t)
                            .to(self.device, copy=True) for t in cpu_inputs)
        # detached aliases of cpu_model's tensors (keeping the per-module versions some loaders check: MNASNet)
        self.initial_state = cpu_model.state_dict()
        self.fn: Callable[..., Any] = backend.wrap(self.model)
        params = list(self.model.parameters())  # none: an inference-only model (no optimizer to build)
        self.optimizer = torch.optim.SGD(params, lr=LEARNING_RATE) if params else None
        self.warmup: Warmup | None = None

    @property
    def batch_size(self) -> int:
        return int(self.spec.batch(self.key.tier))

    def reset(self) -> None:
        """Reload the initial weights and buffers in place (compiled graphs stay valid).

        ``load_state_dict`` copies into the parameters themselves: on XLA an in-place copy into a
        ``detach()``-ed alias (what ``state_dict()`` returns) does not reach the parameter.
        """
        self.model.load_state_dict(self.initial_state)
        self.drop_grads()
        self.backend.sync()

    def drop_grads(self) -> None:
        """Let go of the last step's gradients (each step sets them anew): an idle case holds its weights
        only, not a second model's worth of gradients beside another case's step."""
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)

    def _stage(self, name: str) -> stage:
        return stage(name, step=self.step_index, phase=self.phase, backend=self.backend.name)

    def step(self) -> tuple[Any, Any]:
        """One training step (zero_grad, forward, loss, backward, SGD step) or one inference forward,
        ended by the backend's sync. Returns (outputs, loss or None). An exception leaves with its
        stage written on it (:mod:`pytest_xla_dynamo.core.stages`). A backend with ``split_step``
        also syncs after the forward (and loss) and after the backward."""
        __tracebackhide__ = True
        import torch

        split = self.backend.split_step
        if self.mode == "infer":
            with torch.no_grad(), self._stage("forward"):
                out = self.fn(*self.inputs)
            with self._stage("sync"):
                self.backend.sync()
            return out, None
        with self._stage("optimizer step"):
            if self.optimizer is None:
                raise ValueError(f"{self.spec.name}: the model has no parameters, so a training step has nothing to "
                                 "train (no gradient, no optimizer step); valid: a model with parameters, or its "
                                 "inference parity")
            self.optimizer.zero_grad(set_to_none=True)
        with self._stage("forward"):
            out = self.fn(*self.inputs)
        with self._stage("loss"):
            loss = self.spec.loss(out)
        if split:
            with self._stage("sync"):
                self.backend.sync()
        with self._stage("backward"):
            loss.backward()
        if split:
            with self._stage("sync"):
                self.backend.sync()
        with self._stage("optimizer step"):
            self.optimizer.step()
        with self._stage("sync"):
            self.backend.sync()
        return out, loss

    def warm_up(self) -> Warmup:
        """Run the warm-up steps once (measuring counters and time); later calls return them."""
        if self.warmup is None:
            __tracebackhide__ = True
            warm = Warmup()
            self.reset()
            self.backend.wait()  # the reset's graph must not finish (and count) inside step 1
            for index in range(1, WARMUP_STEPS + 1):
                self.phase, self.step_index = "warm-up", index
                before = metrics.snapshot()
                start = time.perf_counter()
                self.step()
                self.backend.wait()
                warm.step_seconds.append(time.perf_counter() - start)
                warm.per_step.append(metrics.snapshot().delta(before))
            self.drop_grads()
            self.warmup = warm
        return self.warmup


def _leaves(out: Any) -> list[torch.Tensor]:
    import torch
    import torch.utils._pytree as pytree

    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _snap(t: torch.Tensor) -> torch.Tensor:
    # a copy: on CPU .cpu() would alias the live parameter that the next step updates in place
    return t.detach().to("cpu", copy=True)


def step_tensors(model: torch.nn.Module, out: Any, loss: Any, mode: str) -> dict[str, torch.Tensor]:
    """The live tensors of a step (on the case's device, not copied), in the harness's order: loss, outputs,
    gradients, parameters, buffers (training); outputs (inference)."""
    tensors: dict[str, torch.Tensor] = {}
    if loss is not None:
        tensors["loss"] = loss
    for i, t in enumerate(_leaves(out)):
        tensors[f"output[{i}]"] = t
    if mode == "train":
        for name, p in model.named_parameters():
            if p.grad is not None:
                tensors[f"grad {name}"] = p.grad
        for name, p in model.named_parameters():
            tensors[f"param {name}"] = p
        for name, b in model.named_buffers():
            tensors[f"buffer {name}"] = b
    return tensors


def collect(model: torch.nn.Module, out: Any, loss: Any, mode: str) -> TensorSet:
    """The tensors of a step, copied to the CPU (:func:`step_tensors`)."""
    return {name: _snap(t) for name, t in step_tensors(model, out, loss, mode).items()}


class LiveStep(Mapping[str, "torch.Tensor"]):
    """A step's tensors as a mapping whose values are copied to the CPU when read, one at a time: a
    comparison holds one tensor of the step, not all of them. Valid until the case steps again."""

    def __init__(self, live: dict[str, torch.Tensor]) -> None:
        self._live = live

    def __getitem__(self, name: str) -> torch.Tensor:
        return _snap(self._live[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._live)

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, name: object) -> bool:
        return name in self._live

    def release(self) -> None:
        """Let go of the live tensors (the step has been read; a later read finds nothing)."""
        self._live = {}


def iter_live(case: PreparedCase, steps: int, phase: str = "") -> Iterator[LiveStep]:
    """Reset ``case`` to its initial weights, run ``steps`` steps and yield each one's tensors as a
    :class:`LiveStep` (read each before asking for the next). ``phase`` names the steps in a failure's
    stage (``parity``, ``eager reference``). Every run starts from the case's seed (torch's, XLA's, numpy's), so
    that a model drawing random numbers in its forward (detection's box samplers) draws the same ones in every
    eager run of it, and two eager runs differ only where the model is not deterministic."""
    __tracebackhide__ = True
    case.reset()
    seed_everything(case.key.seed)
    for index in range(1, steps + 1):
        case.phase, case.step_index = phase, index
        out, loss = case.step()
        step = LiveStep(step_tensors(case.model, out, loss, case.mode))
        del out, loss
        yield step
        step.release()  # read: let go of its tensors before the next step makes new ones
    case.drop_grads()


def iter_trace(case: PreparedCase, steps: int, phase: str = "") -> Iterator[TensorSet]:
    """:func:`iter_live`, each step copied whole to the CPU (a generator, so that a caller comparing step
    by step holds one step at a time)."""
    __tracebackhide__ = True
    for step in iter_live(case, steps, phase):
        yield dict(step)


class CaseCache:
    """Prepared cases of this process, keyed by :class:`CaseKey`; holds one (model, mode)'s cases at a time
    (the collection hook orders shared-case tests by model, then mode, so each case compiles once)."""

    def __init__(self) -> None:
        self._cases: dict[CaseKey, PreparedCase] = {}

    def release_other(self, model: str, mode: str) -> bool:
        """Forget the cases of every other (model, mode); whether there were any."""
        stale = [k for k in self._cases if (k.model, k.mode) != (model, mode)]
        for old in stale:
            del self._cases[old]
        return bool(stale)

    def get(self, key: CaseKey, make: Callable[[], PreparedCase]) -> PreparedCase:
        case = self._cases.get(key)
        if case is None:
            case = self._cases[key] = make()
        return case

    def __iter__(self) -> Iterator[PreparedCase]:
        """The cases held now (one model's), for tools that reuse them (benchmarks/harness_overhead.py)."""
        return iter(self._cases.values())

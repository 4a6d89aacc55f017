"""Localization: the first submodule whose output (forward) or parameter gradient (backward) diverges.

Run on an accuracy failure: the failing step is rerun from eager's weights at its start (eager runs
the steps before it), on CPU eager, its fp64 copy and the backend, with a forward hook on every
submodule that keeps a copy of its first tensor output. The outputs are compared in execution order
(the order the hooks fired: a module finishes after its children) with the case's tolerance, the first
beyond it is the forward culprit; in training, the parameter gradients are compared module by module in
backward order (the reverse), the first beyond it is the backward culprit.

How the hooks run: under ``trace_everytime`` the captured outputs are lazy tensors, materialized by the
step's sync with the rest of the graph; under ``trace_once`` dynamo traces the hooks into the compiled
graph (a compile of its own, :func:`fresh_compile`) and the captured outputs become extra graph outputs,
so XLA may fuse the graph differently than without them. Input gradients are not captured: full backward hooks are not
traced by dynamo's graphs; parameter gradients stand for them. Where the hooked rerun itself fails, the
localization says ``diagnosis failed: localization: <error>`` instead of a module.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core.backends import Backend
from pytest_xla_dynamo.core.cases import PreparedCase, iter_trace
from pytest_xla_dynamo.core.engine import CaseEngine
from pytest_xla_dynamo.core.stages import diagnosis_failed
from pytest_xla_dynamo.parity.compare import Tolerance, compare_tensor
from pytest_xla_dynamo.parity.plain_math import plain_math

if TYPE_CHECKING:
    import torch

PHASE = "localization"


class _Hooked:
    """A case with a forward hook on every submodule; :meth:`run` steps it once and keeps the outputs."""

    def __init__(self, case: PreparedCase) -> None:
        self.case = case
        self.outputs: list[tuple[str, torch.Tensor]] = []
        self.handles = [module.register_forward_hook(self._hook(name))
                        for name, module in case.model.named_modules() if name]
        if case.backend.dynamo_backend is not None:
            case.fn = fresh_compile(case.model, case.backend)

    def _hook(self, name: str) -> Any:
        import torch

        outputs = self.outputs

        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            if isinstance(output, tuple | list):
                output = next((o for o in output if isinstance(o, torch.Tensor)), None)
            if isinstance(output, torch.Tensor):
                outputs.append((name, keep(output)))

        return hook

    def run(self, step: int) -> tuple[list[tuple[str, torch.Tensor]], dict[str, torch.Tensor]]:
        """One step; the numbered module outputs (``name`` or ``name#2`` for a second call) and the
        parameter gradients, on CPU."""
        case = self.case
        case.reset()
        case.phase, case.step_index = PHASE, step
        try:
            case.step()
        finally:
            for handle in self.handles:
                handle.remove()
        calls: dict[str, int] = {}
        numbered = []
        for name, tensor in self.outputs:
            calls[name] = calls.get(name, 0) + 1
            numbered.append((name if calls[name] == 1 else f"{name}#{calls[name]}",
                             tensor.detach().to("cpu", copy=True)))
        grads = {name: p.grad.detach().to("cpu", copy=True) for name, p in case.model.named_parameters()
                 if p.grad is not None}
        return numbered, grads


def keep(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` a hook keeps, that a graph traced with the hook still computes right.

    Not ``detach().clone()``: under openxla a graph output beside its detached copy loses requires_grad (known issue
    local:openxla-detached-copy-drops-grad). Not ``clone()`` either: openxla's bridge takes a clone for its source
    and returns the graph's outputs out of order (the model's output swapped with a hooked copy, the backward then
    fails in mm(), as local:openxla-clone-before-linear-backward-mm). ``x * 1`` is a value of its own."""
    return x * 1 if x.is_floating_point() else x.clone()


def fresh_compile(model: torch.nn.Module, backend: Backend) -> Any:
    """``model`` compiled through a function with a code object of its own.

    Dynamo caches graphs per code object and does not guard on module hooks
    (``skip_nnmodule_hook_guards``): compiled as it is, a hooked copy of a model already compiled in this
    process would reuse the graph without its hooks. A new code object gets a compile of its own, with the
    hooks traced in.
    """
    import torch

    namespace: dict[str, Any] = {}
    exec("def localized(model, *args):\n    return model(*args)\n", namespace)
    assert backend.dynamo_backend is not None
    compiled = torch.compile(namespace["localized"], backend=backend.dynamo_backend, **backend.compile_kwargs)
    return lambda *args: compiled(model, *args)


def _module_type(model: torch.nn.Module, name: str) -> str:
    try:
        return type(model.get_submodule(name.split("#", 1)[0])).__name__
    except AttributeError:
        return "?"


def start_of_step(
        engine: CaseEngine, spec: zoo.ModelSpec, mode: str, step: int, patches: Sequence[str],
) -> tuple[Any, torch.nn.Module, tuple[torch.Tensor, ...], torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Eager's CPU model at the start of ``step`` (its steps before it run on CPU eager) and its inputs, and their
    fp64 copies: ``(key, model, inputs, fp64_model, fp64_inputs)``, what a rerun of the step starts from (the
    localization here, the conditioning check). Call it inside :func:`plain_math`, as the references run."""
    eager = engine.eager
    key = engine.key(spec, eager, mode, patches)
    model, inputs = engine.build(key, spec)
    if step > 1 and mode == "train":
        walker = PreparedCase(key, spec, eager, model, inputs)
        for _ in iter_trace(walker, step - 1, PHASE):
            pass
        model = copy.deepcopy(walker.model)
    fp64_model = copy.deepcopy(model).double()
    fp64_inputs = tuple(t.double() if t.is_floating_point() else t for t in inputs)
    return key, model, inputs, fp64_model, fp64_inputs


Suspect = tuple[str, str, str, str]  # (kind "module" or "call", type or function, where, direction)


def localize(engine: CaseEngine, spec: zoo.ModelSpec, backend: Backend, mode: str, tol: Tolerance, step: int,
             buffers: Sequence[str] = (), patches: Sequence[str] = (),
             suspects: list[Suspect] | None = None) -> list[str]:
    """The localization of an accuracy failure at ``step``, as lines (see the module docstring);
    ``buffers``: the diverging buffers, named with their owning modules; ``suspects`` gets what runs where the
    divergence starts (the forward culprit and its calls; the parameterless modules and calls the diverging
    gradient flows in through), for the op-level entries (:mod:`pytest_xla_dynamo.triage.mechanisms`)."""
    try:
        return _localize(engine, spec, backend, mode, tol, step, buffers, patches,
                         suspects if suspects is not None else [])
    except Exception as exc:  # a failed localization is reported, the case's own failure stays
        return [diagnosis_failed("localization", exc)]


def _localize(engine: CaseEngine, spec: zoo.ModelSpec, backend: Backend, mode: str, tol: Tolerance, step: int,
              buffers: Sequence[str], patches: Sequence[str], suspects: list[Suspect]) -> list[str]:
    from pytest_xla_dynamo.core.census import take

    with plain_math():  # the references on eager's plain path, as parity's (XLA never takes the fast paths)
        key, model, inputs, fp64_model, fp64_inputs = start_of_step(engine, spec, mode, step, patches)
        census = take(model, inputs, mode == "train")
        ref_out, ref_grads = _Hooked(PreparedCase(key, spec, engine.eager, model, inputs)).run(step)
        fp64_out, fp64_grads = _Hooked(PreparedCase(key, spec, engine.eager, fp64_model, fp64_inputs)).run(step)
    res_key = engine.key(spec, backend, mode, patches)
    res_case = PreparedCase(res_key, spec, backend, model, inputs)
    res_out, res_grads = _Hooked(res_case).run(step)
    lines: list[str] = []
    forward = _first_output(ref_out, fp64_out, res_out, tol)
    prefix = f"step {step} rerun from eager's weights with hooks on {len(ref_out)} module calls"
    seen = {name for name, _ in res_out}
    unseen = [name for name, _ in ref_out if name not in seen]
    if not res_out:
        lines.append(f"no module output observed on {backend.name} (its hooks did not fire): no forward localization")
    elif forward is None:
        lines.append("no module output diverges" + (" among those observed" if unseen else ""))
    else:
        index, name, problem, previous = forward
        before = f"; the module before it, {previous}, matches" if previous else ""
        lines.append(f"first diverging output: {name} ({_module_type(model, name)}), call {index + 1} of "
                     f"{len(ref_out)} in execution order: {problem.split(': ', 1)[-1]}{before}")
        base = name.split("#", 1)[0]
        suspects += [(e.kind, e.what, e.name or "the model", "forward") for e in census.events
                     if e.name == base or (e.kind == "call" and e.name.startswith(base + "."))]
    if unseen and res_out:  # never named as culprits: the backend's hooks did not see them
        lines.append(f"{len(unseen)} of {len(ref_out)} module calls not observed on {backend.name} (not compared): "
                     + ", ".join(unseen[:3]) + (", ..." if len(unseen) > 3 else ""))
    if mode == "train":
        order = list(dict.fromkeys(name.split("#", 1)[0] for name, _ in ref_out))
        backward = _first_grad(order, ref_grads, fp64_grads, res_grads, tol)
        if backward is None:
            lines.append("parameter gradients match, module by module")
        else:
            name, problem = backward
            lines.append(f"first diverging gradient in backward order: {name} ({_module_type(model, name)}): "
                         f"{problem}")
            path = census.between(name)
            suspects += [(e.kind, e.what, e.name or "the model", "backward") for e in path]
            named = [f"{e.name} ({e.what})" for e in path if e.kind == "module"]
            if named:  # a module without parameters has no gradient of its own to compare: named here
                lines.append("its gradient flows in through parameterless " + ", ".join(named[:4])
                             + (", ..." if len(named) > 4 else ""))
    owners = dict.fromkeys(b.removeprefix("buffer ").rsplit(".", 1)[0] for b in buffers)
    if owners:
        shown = ", ".join(f"{o} ({_module_type(model, o)})" for o in list(owners)[:3])
        lines.append(f"diverging buffers belong to {shown}" + (f", +{len(owners) - 3} more" if len(owners) > 3 else ""))
    how = "hooks traced into the compiled graph" if backend.dynamo_backend else "hooks on lazy tensors"
    lines.append(f"({prefix}; {backend.name}: {how})")
    return lines


def _first_output(ref: list[tuple[str, torch.Tensor]], fp64: list[tuple[str, torch.Tensor]],
                  res: list[tuple[str, torch.Tensor]], tol: Tolerance) -> tuple[int, str, str, str] | None:
    """The first module output (in execution order) beyond the tolerance, among those the backend's hooks saw: its
    index, name, problem, and the module compared before it. A call the backend's hooks did not see is skipped,
    never named: under dynamo a hook may not fire on the backend although the module ran there."""
    res_by_name = dict(res)
    fp64_by_name = dict(fp64)
    previous = ""
    for index, (name, ref_t) in enumerate(ref):
        res_t = res_by_name.get(name)
        if res_t is None:
            continue
        problem = compare_tensor(name, ref_t, res_t, fp64_by_name.get(name), tol)
        if problem is not None:
            return index, name, problem, previous
        previous = name
    return None


def _first_grad(order: list[str], ref: dict[str, torch.Tensor], fp64: dict[str, torch.Tensor],
                res: dict[str, torch.Tensor], tol: Tolerance) -> tuple[str, str] | None:
    for module in reversed(order):
        for pname, ref_t in ref.items():
            owner, _, attr = pname.rpartition(".")
            if owner != module or pname not in res:
                continue
            problem = compare_tensor(attr, ref_t, res[pname], fp64.get(pname), tol)
            if problem is not None:
                return module, f"grad {problem}"
    return None

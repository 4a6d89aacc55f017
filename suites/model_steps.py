"""One training step of a zoo model, for the known-issue programs that need a whole model: every tensor it
yields (outputs, gradients, buffers), on a backend and in a dtype. Imports torch: only test modules that need
torch import this."""

from __future__ import annotations

from typing import Any

import torch


def step_outputs(model_name: str, backend: str, step: int, dtype: Any = None,
                  pre_hook: tuple[str, Any] | None = None) -> dict[str, Any]:
    """The zoo's ``model_name`` at the small tier (seed 1337, dropout patched out where it has some: the case
    engine's key and build, with the default options): every tensor of training step ``step`` on ``backend``
    (``grad stem.conv1.conv.weight``, ...), in ``dtype`` if given; ``pre_hook``: (module name, forward pre-hook)
    installed on that module first."""
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.config import XlaConfig
    from pytest_xla_dynamo.core.backends import default_registry
    from pytest_xla_dynamo.core.cases import PreparedCase, iter_trace
    from pytest_xla_dynamo.core.engine import CaseEngine

    engine = CaseEngine(XlaConfig(tier="small", seed=1337), default_registry())
    spec, runs_on = zoo.get_model(model_name), engine.backends.get(backend)
    key = engine.key(spec, runs_on, "train")
    model, inputs = engine.build(key, spec)
    if dtype is not None:
        model, inputs = model.to(dtype), tuple(t.to(dtype) for t in inputs)
    if pre_hook is not None:
        dict(model.named_modules())[pre_hook[0]].register_forward_pre_hook(pre_hook[1])
    return list(iter_trace(PreparedCase(key, spec, runs_on, model, inputs), step))[-1]


def step_tensor(model_name: str, backend: str, tensor: str, step: int, dtype: Any = None) -> Any:
    """One tensor of :func:`step_outputs`."""
    return step_outputs(model_name, backend, step, dtype)[tensor]


def rmse(a: Any, b: Any) -> float:
    return float(torch.sqrt(torch.mean((a.detach().cpu().double() - b.detach().cpu().double()) ** 2)))

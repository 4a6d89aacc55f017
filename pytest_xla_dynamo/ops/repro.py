"""A standalone reproducer of one op sample: a short Python file that needs only torch and torch_xla.

It builds the sample's inputs (the exact values where the sample has at most :data:`EXACT_ELEMENTS`
elements, else values drawn from its seed with its shapes: said in the file), runs the op on the CPU and on
the backend (lazy tensors with one sync, or ``torch.compile`` with the openxla backend), prints both results
and their difference, and exits 1 when they disagree (``torch.allclose`` at rtol = atol = 1e-4, NaN equal to
NaN), 0 when they agree; a crash ends it by its signal. The op is called by its public name where it has one
(``torch.nn.functional.elu``), else looked up in torch's own OpInfo database (which needs ``expecttest``).
"""

from __future__ import annotations

import importlib
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

EXACT_ELEMENTS = 4096  # a sample with more elements than this is rebuilt from its seed (a file stays readable)
TOLERANCE = 1e-4

TEMPLATE = '''\
"""{title}

Written by pytest-xla-dynamo from sample {index} of torch's OpInfo entry {op_id!r} ({values}).
Runs the op on the CPU and on the XLA device ({how}), prints both and their difference, and exits 1 when they
disagree (torch.allclose, rtol = atol = {tol:g}, NaN equal to NaN), 0 when they agree.

    PJRT_DEVICE=CPU python {filename}
"""
import os
import sys

os.environ.setdefault("PJRT_DEVICE", "CPU")
import torch
import torch_xla

DEVICE = torch_xla.device()  # the runtime up before any CPU backward (pytorch/xla#4174)
SEED = {seed}
BACKWARD = {backward}
COMPILE = {compile!r}  # torch.compile's backend, or None: lazy tensors with one sync
inf, nan = float("inf"), float("nan")

{op_def}


def sample():
    """The sample: the op's input, positional and keyword arguments."""
    torch.manual_seed(SEED)
    return {sample_expr}


def move(x, device, leaves):
    if isinstance(x, torch.Tensor):
        t = x.detach().to(device).requires_grad_(x.requires_grad)
        leaves.append(t)
        return t
    if isinstance(x, (list, tuple)):
        return type(x)(move(v, device, leaves) for v in x)
    if isinstance(x, dict):
        return {{k: move(v, device, leaves) for k, v in x.items()}}
    return x


def flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in flat(v)]
    return []


def run(device, compiled):
    leaves = []
    inp, args, kwargs = move(sample(), device, leaves)
    fn = op if compiled is None else torch.compile(lambda *a, **k: op(*a, **k), backend=compiled, dynamic=False)
    outputs = flat(fn(inp, *args, **kwargs))
    if BACKWARD:
        wanted = [torch.view_as_real(o) if o.is_complex() else o for o in outputs
                  if o.requires_grad and (o.is_floating_point() or o.is_complex())]
        inputs = [t for t in leaves if t.requires_grad]
        cotangents = [torch.randn(o.shape, generator=torch.Generator().manual_seed(SEED + i)).to(o.dtype)
                      for i, o in enumerate(wanted)]
        loss = sum((o * c.to(device)).sum() for o, c in zip(wanted, cotangents))
        grads = torch.autograd.grad(loss, inputs, allow_unused=True)
        outputs = [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]
    if device != "cpu":
        torch_xla.sync()
    return [t.detach().cpu() for t in outputs]


cpu = run("cpu", None)
xla = run(DEVICE, COMPILE)
bad = len(cpu) != len(xla)
for i, (a, b) in enumerate(zip(cpu, xla)):
    print(f"{{'grad' if BACKWARD else 'output'}}[{{i}}] cpu: {{a}}")
    print(f"{{'grad' if BACKWARD else 'output'}}[{{i}}] xla: {{b}}")
    if a.shape != b.shape or a.dtype != b.dtype:
        print(f"  differ: shape/dtype {{tuple(b.shape)}} {{b.dtype}} vs {{tuple(a.shape)}} {{a.dtype}}")
        bad = True
    elif a.is_floating_point() or a.is_complex():
        if not torch.allclose(a, b, rtol={tol!r}, atol={tol!r}, equal_nan=True):
            diff = (a.double() - b.double()).abs().nan_to_num(nan=float("inf"))
            print(f"  differ: max abs difference {{diff.max().item():.3g}}")
            bad = True
    elif not torch.equal(a, b):
        print(f"  differ: {{int((a != b).sum())}} of {{a.numel()}} elements")
        bad = True
print("{op_id} {direction} on {backend}:", "DIFFERS from the CPU" if bad else "agrees with the CPU")
sys.exit(1 if bad else 0)
'''


class Reproducer:
    """The reproducer of sample ``index`` of ``op_id`` (``op``: its OpInfo entry) on ``backend``."""

    def __init__(self, op_id: str, op: Any, sample: Any, backend: str, direction: str, seed: int,
                 index: int) -> None:
        self.op_id, self.op, self.sample = op_id, op, sample
        self.backend, self.direction, self.seed, self.index = backend, direction, seed, index

    @property
    def filename(self) -> str:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.op_id)
        return f"repro_{safe}-{self.backend}-{self.direction}-{self.index}.py"

    def source(self) -> str:
        exact = _numel(self.sample) <= EXACT_ELEMENTS
        expr, inexact = sample_source(self.sample, exact)
        values = "the exact values" if exact else "values drawn from its seed with its shapes: not its own"
        if inexact:
            values += f"; not written exactly: {', '.join(inexact)}"
        compiled = {"forward": "openxla_eval", "backward": "openxla"}[self.direction]
        how = f"torch.compile(backend={compiled!r})" if self.backend == "trace_once" else "lazy tensors, one sync"
        title = f"{self.op_id} {self.direction} on {self.backend}: the CPU and torch_xla disagree"
        return TEMPLATE.format(
            title=title, index=self.index, op_id=self.op_id, values=values, how=how, tol=TOLERANCE,
            filename=self.filename, seed=self.seed, backward=self.direction == "backward",
            compile=compiled if self.backend == "trace_once" else None, op_def=op_source(self.op_id, self.op.op),
            sample_expr=expr, direction=self.direction, backend=self.backend)

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / self.filename
        path.write_text(self.source())
        return path


def op_source(op_id: str, fn: Any) -> str:
    """The ``op`` function of a reproducer: the op's public name where it resolves to the same object, else a
    lookup in torch's OpInfo database."""
    name = public_name(fn)
    if name is not None:
        return f"op = {name}"
    variant = op_id.split(".")[-1]
    return ("# no public name for this entry's callable: it is taken from torch's OpInfo database (pip install "
            "expecttest), its random ops not reseeded by wrapper_set_seed\n"
            "import torch.testing._internal.common_methods_invocations as cmi\n"
            "from torch.testing._internal.common_methods_invocations import op_db\n\n"
            "cmi.wrapper_set_seed = lambda f, *args, **kwargs: f(*args, **kwargs)\n"
            f"op = next(o for o in op_db if (o.name + ('.' + o.variant_test_name if o.variant_test_name else '')) "
            f"== {op_id!r}).op  # {variant}")


def public_name(fn: Any) -> str | None:
    """``module.qualname`` of ``fn`` where importing it gives ``fn`` back (``torch.nn.functional.elu``)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        return None
    for candidate in (module, "torch"):
        try:
            obj: Any = importlib.import_module(candidate)
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            continue
        if obj is fn:
            return f"{candidate}.{qualname}"
    return None


def _numel(sample: Any) -> int:
    from pytest_xla_dynamo.ops.samples import call_of

    return sum(t.numel() for t in call_of(None, sample).leaves)


def sample_source(sample: Any, exact: bool) -> tuple[str, list[str]]:
    """The Python expression of ``(input, args, kwargs)``, and what it could not write exactly."""
    inexact: list[str] = []
    parts = (value_source(sample.input, exact, inexact), value_source(list(sample.args), exact, inexact),
             value_source(dict(sample.kwargs), exact, inexact))
    return f"({parts[0]}, {parts[1]}, {parts[2]})", inexact


def value_source(value: Any, exact: bool, inexact: list[str]) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:  # a sparse sample: written dense, as the file says
            inexact.append(f"a {value.layout} tensor, written dense")
            value = value.to_dense()
        return tensor_source(value, exact)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(value_source(v, exact, inexact) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {value_source(v, exact, inexact)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return _float(value)
    text = repr(value)
    try:
        eval(text, {"torch": torch, "inf": math.inf, "nan": math.nan})
    except Exception:
        inexact.append(f"{type(value).__name__} {text[:60]}")
        return "None"
    return text


def _float(v: float) -> str:
    return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def tensor_source(t: torch.Tensor, exact: bool) -> str:
    """A tensor's expression: its values (or a seeded draw of its shape), dtype and requires_grad."""
    import torch

    dtype = str(t.dtype)
    grad = ".requires_grad_()" if t.requires_grad else ""
    shape = list(t.shape)
    if exact or t.numel() == 0:
        flat = t.detach().reshape(-1).tolist()
        values = ", ".join(_float(v) if isinstance(v, float) else repr(v) for v in flat)
        return f"torch.tensor([{values}], dtype={dtype}).reshape({shape}){grad}"
    if t.dtype == torch.bool:
        return f"(torch.rand({shape}) > 0.5){grad}"
    if t.is_floating_point() or t.is_complex():
        return f"torch.randn({shape}, dtype={dtype}){grad}"
    low, high = int(t.min()), int(t.max()) + 1
    return f"torch.randint({low}, {high}, {shape}, dtype={dtype}){grad}"

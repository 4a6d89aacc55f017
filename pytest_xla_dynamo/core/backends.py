"""Backends under test: how each one places, wraps and syncs a model, and what it supports.

Built in: ``trace_once`` (``torch.compile(backend="openxla")`` on the XLA device), ``trace_everytime``
(lazy tensors on the XLA device, no dynamo), ``trace_everytime_split`` (the same, synced after
the forward and the backward: trace_once's graph cuts without dynamo), ``eager`` (CPU, the reference
and timing baseline), and peers ``openxla_eval`` (inference only), ``inductor`` and ``aot_eager``
(CPU). The seed's names are aliases. They are the process's :data:`BACKENDS` (a
:class:`~pytest_xla_dynamo.registries.NamedRegistry`, the style every extension point has); downstream projects
add backends with the ``pytest_xla_register_backends`` hook or the ``pytest_xla_dynamo.backends`` entry point
group (an entry point names a :class:`Backend` or a callable returning an iterable of them). Defining backends
imports no torch.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.registries import NamedRegistry

if TYPE_CHECKING:
    import torch

ENTRY_POINT_GROUP = "pytest_xla_dynamo.backends"


@dataclass(frozen=True)
class Backend:
    """A backend under test.

    ``dynamo_backend`` is the ``torch.compile`` backend (None: no dynamo); ``device_kind`` is
    ``"xla"`` (the process's XLA device) or ``"cpu"``; ``stats`` lists the graph statistics it
    exposes (``"dynamo"``: dynamo counters, ``"xla"``: torch_xla metrics); ``split_step``: a training
    step also syncs after the forward (and loss) and after the backward, cutting the lazy graph where
    ``trace_once`` cuts its graphs.
    """

    name: str
    description: str
    device_kind: str = "xla"
    dynamo_backend: str | None = None
    training: bool = True
    inference: bool = True
    aliases: tuple[str, ...] = ()
    stats: tuple[str, ...] = ()
    split_step: bool = False
    compile_kwargs: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_xla(self) -> bool:
        return self.device_kind == "xla"

    def supports(self, mode: str) -> bool:
        """Whether this backend runs ``mode`` ("train" or "infer")."""
        return self.training if mode == "train" else self.inference

    def device(self) -> torch.device:
        """The device models and inputs live on for this backend."""
        import torch

        if self.is_xla:
            from pytest_xla_dynamo.core.devices import xla_device

            return xla_device()
        return torch.device("cpu")

    def wrap(self, model: torch.nn.Module) -> Callable[..., Any]:
        """The callable that runs ``model`` under this backend (compiled when it uses dynamo)."""
        if self.dynamo_backend is None:
            return model
        import torch

        if self.is_xla:
            import torch_xla  # noqa: F401  (registers the openxla backends)
        return torch.compile(model, backend=self.dynamo_backend, **self.compile_kwargs)

    def sync(self) -> None:
        """End a step: cut and launch the pending lazy graph (XLA); no-op on CPU."""
        if self.is_xla:
            import torch_xla

            torch_xla.sync()

    def wait(self) -> None:
        """Block until the device has finished all launched work (for measurements)."""
        if self.is_xla:
            import torch_xla.core.xla_model as xm

            xm.wait_device_ops()

    def __str__(self) -> str:
        return self.name


BUILTIN_BACKENDS: tuple[Backend, ...] = (
    Backend("trace_once", "torch.compile(backend='openxla') on the XLA device: AOTAutograd forward and "
            "backward graphs plus the optimizer's lazy graph", dynamo_backend="openxla",
            aliases=("aot_torchxla_trace_once", "torchxla_trace_once", "openxla"), stats=("dynamo", "xla")),
    Backend("trace_everytime", "the model on the XLA device without dynamo: lazy tensors, one combined "
            "graph per torch_xla.sync()", stats=("xla",)),
    Backend("trace_everytime_split", "trace_everytime with a torch_xla.sync() after the forward and after the "
            "backward: lazy graphs cut where trace_once cuts its graphs (the seed's graph-size diagnosis)",
            stats=("xla",), split_step=True),
    Backend("eager", "CPU eager: the reference and the timing baseline", device_kind="cpu"),
    Backend("openxla_eval", "torch.compile(backend='openxla_eval') on the XLA device, inference only",
            dynamo_backend="openxla_eval", training=False, stats=("dynamo", "xla")),
    Backend("inductor", "torch.compile(backend='inductor') on CPU", device_kind="cpu",
            dynamo_backend="inductor", stats=("dynamo",)),
    Backend("aot_eager", "torch.compile(backend='aot_eager') on CPU (AOTAutograd, eager kernels)",
            device_kind="cpu", dynamo_backend="aot_eager", stats=("dynamo",)),
)

# Names the seed (pytorch PR #88449) used; accepted with a note, since they no longer exist in torch.
SEED_ALIAS_NOTE = ("{alias!r} is the seed's name (removed from torch in 2024); running it as {name!r} "
                   "(torch.compile backend 'openxla')")


class BackendRegistry(NamedRegistry[Backend]):
    """Backends by name, in registration order, with their aliases."""

    def __init__(self, backends: Iterable[Backend] = ()) -> None:
        self._aliases: dict[str, str] = {}
        super().__init__("backend", Backend, backends)

    def register(self, backend: Backend, *, replace: bool = False) -> None:
        """Add ``backend``; another one of the same name is an error unless ``replace``."""
        super().register(backend, replace=replace)
        for alias in backend.aliases:
            self._aliases[alias] = backend.name

    @property
    def aliases(self) -> dict[str, str]:
        return dict(self._aliases)

    def get(self, name: str) -> Backend:
        """The backend called ``name`` (or one of its aliases); KeyError names the valid ones."""
        return super().get(self._aliases.get(name, name))

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or name in self._aliases


#: the process's backends: the built-ins, the entry points' (read at the first :func:`default_registry`) and a
#: project's (``pytest_xla_register_backends``)
BACKENDS = BackendRegistry(BUILTIN_BACKENDS)


def entry_point_backends() -> list[Backend]:
    """Backends that installed packages declare in the ``pytest_xla_dynamo.backends`` group."""
    found: list[Backend] = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken third-party entry point must not break pytest --help
            warnings.warn(f"pytest-xla-dynamo: cannot load backend entry point {ep.name!r}: {exc}",
                          stacklevel=2)
            continue
        if callable(obj) and not isinstance(obj, Backend):
            obj = obj()
        found.extend([obj] if isinstance(obj, Backend) else list(obj))
    return found


@cache
def _register_entry_points() -> None:
    for backend in entry_point_backends():
        BACKENDS.register(backend)


def default_registry() -> BackendRegistry:
    """The process's backends (:data:`BACKENDS`): the built-ins plus the entry-point ones."""
    _register_entry_points()
    return BACKENDS

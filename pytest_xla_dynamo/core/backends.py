"""Backends under test: how each one places, wraps and syncs a model, and what it supports.

Built in: ``trace_once`` (``torch.compile(backend="openxla")`` on the XLA device), ``trace_everytime``
(lazy tensors on the XLA device, no dynamo), ``trace_everytime_split`` (the same, synced after
the forward and the backward: trace_once's graph cuts without dynamo), ``eager`` (CPU, the reference
and timing baseline), and peers ``openxla_eval`` (inference only), ``inductor`` and ``aot_eager``
(CPU). The seed's names are aliases. Downstream projects add backends with the
``pytest_xla_register_backends`` hook or the ``pytest_xla_dynamo.backends`` entry point group (an
entry point names a :class:`Backend` or a callable returning an iterable of them). Defining backends imports no torch.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any

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


class BackendRegistry:
    """Backends by name, in registration order, with their aliases."""

    def __init__(self, backends: Iterable[Backend] = ()) -> None:
        self._backends: dict[str, Backend] = {}
        self._aliases: dict[str, str] = {}
        for backend in backends:
            self.register(backend)

    def register(self, backend: Backend, *, replace: bool = False) -> None:
        """Add ``backend``; a second one of the same name is an error unless ``replace``."""
        if not isinstance(backend, Backend):
            raise TypeError(f"expected a pytest_xla_dynamo.core.backends.Backend, got {backend!r}")
        if backend.name in self._backends and not replace:
            if self._backends[backend.name] == backend:
                return
            raise ValueError(f"backend {backend.name!r} is already registered")
        self._backends[backend.name] = backend
        for alias in backend.aliases:
            self._aliases[alias] = backend.name

    def names(self) -> list[str]:
        return list(self._backends)

    @property
    def aliases(self) -> dict[str, str]:
        return dict(self._aliases)

    def get(self, name: str) -> Backend:
        """The backend called ``name`` (or one of its aliases); KeyError names the valid ones."""
        name = self._aliases.get(name, name)
        try:
            return self._backends[name]
        except KeyError:
            raise KeyError(f"unknown backend {name!r}; valid: {', '.join(self.names())}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._backends or name in self._aliases


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


def default_registry() -> BackendRegistry:
    """The built-in backends plus the entry-point ones."""
    return BackendRegistry([*BUILTIN_BACKENDS, *entry_point_backends()])

"""The case engine: the one place that builds, caches and warms up cases, for parity, graphs and timing.

A process has one :class:`CaseEngine` (``XlaSession.engine``). It turns the session's options into a
:class:`~pytest_xla_dynamo.core.cases.CaseKey` (tier, seed, patches, input randomization), builds each
(model, backend, mode) once per process, and keeps it warmed up in a :class:`~pytest_xla_dynamo.core.cases.CaseCache`
(one (model, mode) at a time: the collection hook orders shared-case tests by model, then mode). The parity
references (eager twice, and fp64) are cached here too, beside the cases they were built with.
It knows nothing of pytest: the session passes it its options (:class:`CaseOptions`) and its backends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.core import patches
from pytest_xla_dynamo.core.backends import Backend, BackendRegistry
from pytest_xla_dynamo.core.cases import CaseCache, CaseKey, PreparedCase, build_inputs, build_model
from pytest_xla_dynamo.core.stages import stage
from pytest_xla_dynamo.core.state import release_memory
from pytest_xla_dynamo.core.user_case import is_own_case

if TYPE_CHECKING:
    import torch


class CaseOptions(Protocol):
    """The options a case is built with (the session's ``XlaConfig`` is one)."""

    @property
    def tier(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def patches(self) -> tuple[str, ...]: ...
    @property
    def dropout(self) -> str: ...
    @property
    def randomize_input(self) -> bool: ...
    @property
    def steps(self) -> int: ...
    @property
    def accuracy_runs(self) -> int: ...


#: ``(model, inputs, train) -> ["module (function p=...)", ...]``: the random calls of one forward no patch reaches
RandomOps = Callable[["torch.nn.Module", Sequence[Any], bool], list[str]]


class CachedReference(Protocol):
    """A parity reference the engine keeps beside its case (``parity.Reference``), closed when freed."""

    def close(self) -> None: ...


#: what a user's case is refused with names the own-model API's arguments (``xla_parity.training`` / ``.inference``,
#: ``xla_graphs.check``) and the marker
USER_FIX = ("Pass has_dropout=True to xla_parity.training(...) / .inference(...) or xla_graphs.check(...), or mark "
            "the test @pytest.mark.xla_patch('dropout_to_identity')")


class CaseEngine:
    """Prepared cases of this process, built from the session's options (see the module docstring)."""

    def __init__(self, xcfg: CaseOptions, backends: BackendRegistry, random_ops: RandomOps | None = None) -> None:
        self.xcfg = xcfg
        self.backends = backends
        # the random functional calls of a user's model no patch reaches (``core.census.random_ops``, given by the
        # session: the core imports no plugin layer)
        self.random_ops = random_ops
        self.cases = CaseCache()
        # the CPU model and inputs every shared case and reference of the (model, mode) in focus starts from,
        # built once (read-only: cases copy it, their initial state aliases it)
        self._initial: dict[tuple[Any, ...], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]] = {}
        # parity references: (CaseKey of the eager case, steps) -> parity.Reference, one (model, mode) at a time
        self.references: dict[tuple[CaseKey, int], CachedReference] = {}

    def focus(self, model: str, mode: str) -> None:
        """Free every prepared case and parity reference of another (model, mode) than this one, and the
        memory they held, before building this one's: a process holds one (model, mode) at a time."""
        stale = [k for k in self.references if (k[0].model, k[0].mode) != (model, mode)]
        for old in stale:
            self.references.pop(old).close()
        built = [k for k in self._initial if (k[0], k[1]) != (model, mode)]
        for old_built in built:
            del self._initial[old_built]
        if self.cases.release_other(model, mode) or stale or built:
            release_memory()

    def patch_names(self, spec: zoo.ModelSpec, extra: Sequence[str] = ()) -> tuple[str, ...]:
        """The op patches a case is built with: ``--xla-patch``, ``extra``, and dropout's when the
        model has dropout and ``xla_dropout=identity``."""
        names = list(self.xcfg.patches) + list(extra)
        if spec.has_dropout and self.xcfg.dropout == "identity":
            names.append("dropout_to_identity")
        return tuple(dict.fromkeys(names))

    def key(self, spec: zoo.ModelSpec, backend: Backend, mode: str, extra_patches: Sequence[str] = ()) -> CaseKey:
        x = self.xcfg
        return CaseKey(spec.name, backend.name, mode, x.tier, x.seed, self.patch_names(spec, extra_patches),
                       x.randomize_input)

    def build(self, key: CaseKey, spec: zoo.ModelSpec) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        """A fresh CPU model and its inputs for ``key``."""
        __tracebackhide__ = True
        with stage("build", backend=key.backend):
            model = build_model(spec, key.tier, key.seed, key.patches)
            self._check_dropout_flag(spec, model, key)
            inputs = build_inputs(spec, key.tier, key.seed, key.randomize_input)
            self._check_random_calls(spec, model, inputs, key)
        return model, inputs

    def initial(self, key: CaseKey, spec: zoo.ModelSpec) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        """The CPU model and inputs of ``key`` shared by the (model, mode) in focus: built once, whatever the
        backend, so a model's cases and references hold one CPU copy of its initial weights. Read-only: a
        :class:`PreparedCase` copies the model and never steps it; a caller that changes it uses :meth:`build`."""
        __tracebackhide__ = True
        cache_key = (key.model, key.mode, key.tier, key.seed, key.patches, key.randomize_input)
        built = self._initial.get(cache_key)
        if built is None:
            self.focus(key.model, key.mode)
            built = self._initial[cache_key] = self.build(key, spec)
        return built

    def _check_dropout_flag(self, spec: zoo.ModelSpec, model: torch.nn.Module, key: CaseKey) -> None:
        """A model with random modules left in by a spec saying it has none would fail parity for the
        zoo's mistake (eager and XLA draw different masks): refuse it, naming the modules and the fix. Only in
        training: in eval no dropout module (nor attention dropout, stochastic depth, layer drop) draws."""
        if spec.has_dropout or self.xcfg.dropout != "identity" or "dropout_to_identity" in key.patches \
                or key.mode != "train":
            return
        found = patches.random_modules(model)
        if found:
            shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
            if is_own_case(spec):
                raise patches.RandomOpsError(
                    f"model {spec.name!r} draws random numbers in training: {shown}; eager and XLA would draw "
                    f"different masks. {USER_FIX} (the dropout_to_identity patch then switches them off), or build "
                    "it with rate 0")
            raise patches.RandomOpsError(
                f"model {spec.name!r} says has_dropout=False, but at the {key.tier} tier it draws random numbers "
                f"in training: {shown}; eager and XLA would draw different masks. Declare has_dropout=True in its "
                "spec (the dropout patch then switches them off), or build it with rate 0")

    def _check_random_calls(self, spec: zoo.ModelSpec, model: torch.nn.Module, inputs: Sequence[Any],
                            key: CaseKey) -> None:
        """A user's model whose own forward draws random numbers (``F.dropout(x, 0.1, training=True)``,
        attention with ``dropout_p > 0``) in this case's mode: refused, since no patch reaches a functional call."""
        if not is_own_case(spec) or self.random_ops is None or self.xcfg.dropout != "identity":
            return
        found = self.random_ops(model, inputs, key.mode == "train")
        if found:
            mode = "training" if key.mode == "train" else "eval"
            raise patches.RandomOpsError(
                f"model {spec.name!r} draws random numbers in {mode} through functional calls: {', '.join(found)}; "
                "eager and XLA would draw different masks, and no patch reaches a call in a forward: give it a rate "
                "of 0 (or an nn.Dropout module, which has_dropout=True switches off) while checking parity")

    def fresh(self, spec: zoo.ModelSpec, backend: Backend, mode: str,
              extra_patches: Sequence[str] = ()) -> PreparedCase:
        """A case built afresh, not shared (a user's model, or a test proving that sharing changes nothing)."""
        __tracebackhide__ = True
        key = self.key(spec, backend, mode, extra_patches)
        return PreparedCase(key, spec, backend, *self.build(key, spec))

    def prepared(self, spec: zoo.ModelSpec, backend: Backend, mode: str,
                 extra_patches: Sequence[str] = ()) -> PreparedCase:
        """The shared prepared case (built, placed and wrapped once per process), warmed up."""
        __tracebackhide__ = True
        key = self.key(spec, backend, mode, extra_patches)

        def make() -> PreparedCase:
            return PreparedCase(key, spec, backend, *self.initial(key, spec))

        self.focus(key.model, key.mode)
        case = self.cases.get(key, make)
        case.warm_up()
        return case

    @property
    def eager(self) -> Backend:
        """CPU eager, the reference of every parity check."""
        return self.backends.get("eager")

"""Where a case broke: the stage of a training or inference step, written onto the exception itself.

The case code runs each part of a step inside :class:`stage` (``with stage("backward", ...)``); an
exception that leaves it carries a :class:`Where` (stage, step, phase, backend) as an attribute and
goes on unchanged, so strict xfails with ``raises=`` still see the real exception. Compile failures
are told apart from the stage they surfaced in by the exception's class (dynamo raises
``BackendCompilerFailed`` when the backend's compile fails, ``Unsupported`` and friends while it
traces). No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any

#: the stages of a case, in the order a step runs them
STAGES = ("build", "place", "forward", "loss", "backward", "optimizer step", "sync", "comparison")
ATTR = "_xla_dynamo_where"
#: the start of a diagnosis's note where the diagnosis itself raised: it decides nothing, and says so
DIAGNOSIS_FAILED = "diagnosis failed: "


def diagnosis_failed(what: str, exc: BaseException, limit: int = 200) -> str:
    """``diagnosis failed: <what>: <exception type>: <its message's first line>`` (cut at ``limit`` characters)."""
    text = str(exc).strip()
    return f"{DIAGNOSIS_FAILED}{what}: {type(exc).__name__}: {text.splitlines()[0][:limit] if text else ''}"


#: an exception attribute: its message carries a triage already (a timing process's report), so it gets no second one
TRIAGED = "xla_triaged"

# exception class names (anywhere in the MRO) that mean a compile, and which one
_COMPILE = {"BackendCompilerFailed": "the dynamo backend's compile"}
_TRACE = {"Unsupported": "dynamo's tracing", "UserError": "dynamo's tracing",
          "TorchRuntimeError": "dynamo's tracing (running the graph on fake tensors)",
          "InternalTorchDynamoError": "dynamo's tracing", "UncapturedHigherOrderOpError": "dynamo's tracing"}


@dataclass(frozen=True)
class Where:
    """Where an exception surfaced: ``stage`` (one of :data:`STAGES`), the ``step`` (1-based), the
    ``phase`` (``warm-up``, ``parity``, ``eager reference``, ...) and the ``backend``."""

    stage: str
    step: int | None = None
    phase: str = ""
    backend: str = ""

    def describe(self, during: str = "") -> str:
        """``backward of warm-up step 1 on trace_once``, with ``during`` (:func:`compile_part`) where the
        exception came from a compile."""
        text = self.stage
        if self.step is not None:
            text += f" of {self.phase + ' ' if self.phase else ''}step {self.step}"
        elif self.phase:
            text += f" ({self.phase})"
        if self.backend:
            text += f" on {self.backend}"
        return f"{text}, during {during}" if during else text

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "step": self.step, "phase": self.phase, "backend": self.backend}


def class_names(exc: BaseException) -> list[str]:
    """The class names of ``exc`` along its MRO, plain and dotted (``RuntimeError``,
    ``builtins.RuntimeError``, ``torch._dynamo.exc.BackendCompilerFailed``, ...)."""
    names: list[str] = []
    for cls in type(exc).__mro__:
        if cls is object:
            continue
        names += [cls.__name__, f"{cls.__module__}.{cls.__qualname__}"]
    return list(dict.fromkeys(names))


def compile_part(exc: BaseException) -> str:
    """``the dynamo backend's compile`` / ``dynamo's tracing`` when ``exc`` says so, else ``""``."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    for table in (_COMPILE, _TRACE):
        for name, text in table.items():
            if name in names:
                return text
    return ""


def where_of(exc: BaseException | None) -> Where | None:
    """The :class:`Where` written on ``exc`` (or on an exception it was raised from)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        found = getattr(exc, ATTR, None)
        if isinstance(found, Where):
            return found
        exc = exc.__cause__ or exc.__context__
    return None


def mark(exc: BaseException, where: Where) -> None:
    """Write ``where`` on ``exc`` unless an inner stage already did (the innermost stage wins)."""
    if where_of(exc) is None:
        try:
            setattr(exc, ATTR, where)
        except (AttributeError, TypeError):  # an exception type without a __dict__: left unmarked
            pass


class stage:
    """``with stage("backward", step=1, phase="parity", backend="trace_once"):`` marks an exception
    leaving the block with its :class:`Where`, and lets it go on unchanged (no frame of its own)."""

    def __init__(self, name: str, *, step: int | None = None, phase: str = "", backend: str = "") -> None:
        self.where = Where(name, step, phase, backend)

    def __enter__(self) -> Where:
        return self.where

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None and isinstance(exc, Exception):
            mark(exc, self.where)

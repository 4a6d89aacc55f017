"""The model registry: register specs, look them up by name, resolve option values into names.

:data:`MODELS` is the process's :class:`~pytest_xla_dynamo.registries.NamedRegistry` of models (the style every
extension point has); the functions here are its public face. Registration order is the zoo's order
(:func:`model_names`), which the reports use to sort models: the seed's nine come first, in the seed's order.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from pytest_xla_dynamo.registries import NamedRegistry
from pytest_xla_dynamo.zoo.spec import ALL, ModelSpec


class UnknownModelError(ValueError):
    """An unknown model name; the message names the bad value(s) and lists the valid names."""

    def __init__(self, unknown: str | Sequence[str], valid: Sequence[str] | None = None) -> None:
        self.unknown: tuple[str, ...] = (unknown,) if isinstance(unknown, str) else tuple(unknown)
        self.valid: tuple[str, ...] = tuple(model_names() if valid is None else valid)
        bad = ", ".join(repr(u) for u in self.unknown)
        noun = "model" if len(self.unknown) == 1 else "models"
        hints = []
        for u in self.unknown:
            close = difflib.get_close_matches(u, self.valid, n=1) or [v for v in self.valid if v.lower() == u.lower()]
            if close:
                hints.append(f"{u!r} -> {close[0]!r}?")
        msg = f"unknown {noun} {bad}; valid models: {', '.join(self.valid) or '(none registered)'}"
        if hints:
            msg += f" (did you mean: {'; '.join(hints)})"
        super().__init__(msg)


#: the process's models: the zoo's (registered when :mod:`pytest_xla_dynamo.zoo` is imported) and a project's
#: (``pytest_xla_register_models``)
MODELS: NamedRegistry[ModelSpec] = NamedRegistry(
    "model", ModelSpec, unknown=lambda name, valid: UnknownModelError(str(name), valid))


def register_model(spec: ModelSpec, *, replace: bool = False) -> None:
    """Add ``spec`` to the zoo (:class:`ValueError` if the name is taken by another spec, unless ``replace``).

    A replaced model keeps its place in :func:`model_names`; a new one goes last.
    """
    MODELS.register(spec, replace=replace)


def get_model(name: str) -> ModelSpec:
    """The spec registered as ``name`` (:class:`UnknownModelError` if none)."""
    return MODELS.get(name)


def model_names() -> list[str]:
    """Registered model names in registration order (the seed's order first)."""
    return MODELS.names()


def collection_names() -> list[str]:
    """The collections of the registered models, in registration order (the seed's first)."""
    return list(dict.fromkeys(spec.collection for spec in MODELS))


def models_in(collections: Sequence[str]) -> list[str]:
    """The registered models of ``collections``, in registration order."""
    chosen = set(collections)
    return [spec.name for spec in MODELS if spec.collection in chosen]


def resolve_models(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Turn an option value into model names.

    ``None``, ``""``, ``"all"`` (or an empty list) select every model in registration order.
    Otherwise a comma list (or a sequence of names, each of which may itself be a comma list),
    validated, de-duplicated, in the given order; ``"all"`` inside a list expands in place.
    Unknown names raise one :class:`UnknownModelError` naming all of them and the valid names.
    """
    everything = tuple(MODELS.names())
    if value is None:
        return everything
    parts = [value] if isinstance(value, str) else list(value)
    tokens: list[str] = []
    for part in parts:
        if not isinstance(part, str):
            raise TypeError(f"model names must be strings, got {part!r}")
        tokens.extend(t.strip() for t in part.split(","))
    tokens = [t for t in tokens if t]
    if not tokens:
        return everything
    unknown = [t for t in dict.fromkeys(tokens) if t != ALL and t not in MODELS]
    if unknown:
        raise UnknownModelError(unknown, everything)
    out: dict[str, None] = {}
    for t in tokens:
        for name in everything if t == ALL else (t,):
            out.setdefault(name, None)
    return tuple(out)

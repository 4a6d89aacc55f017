"""Named registries: the one style of the plugin's extension points (models, backends, op patches).

Each kind has one :class:`NamedRegistry` per process: ``zoo.MODELS`` (:class:`~pytest_xla_dynamo.zoo.ModelSpec`),
``core.backends.BACKENDS`` (:class:`~pytest_xla_dynamo.core.backends.Backend`, with aliases) and
``core.patches.PATCHES`` (:class:`~pytest_xla_dynamo.core.patches.Patch`). The built-ins are registered when
their module is imported; a project's, when the plugin turns on, by the kind's hook
(``pytest_xla_register_models``, ``pytest_xla_register_backends``, ``pytest_xla_register_patches``), which is
given the registry (``registry``) and its :meth:`~NamedRegistry.register` (``register``). Registration order
is the order the names are listed in (``--help``, ``all``, the reports). No pytest, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


def _unknown(kind: str) -> Callable[[str, list[str]], Exception]:
    return lambda name, valid: KeyError(f"unknown {kind} {name!r}; valid: {', '.join(valid)}")


class NamedRegistry(Generic[T]):
    """Items of one kind by name, in registration order.

    ``kind`` names them in messages, ``item_type`` is what :meth:`register` takes, ``unknown(name, valid)`` is the
    exception :meth:`get` raises for a name that is not registered (default: a KeyError naming the valid ones).
    """

    def __init__(self, kind: str, item_type: type[T], items: Iterable[T] = (),
                 unknown: Callable[[str, list[str]], Exception] | None = None) -> None:
        self.kind = kind
        self.item_type = item_type
        self._unknown = unknown or _unknown(kind)
        self._items: dict[str, T] = {}
        for item in items:
            self.register(item)

    def register(self, item: T, *, replace: bool = False) -> None:
        """Add ``item`` (the same item again changes nothing); another of a taken name is a ValueError unless
        ``replace``, which keeps the name's place."""
        if not isinstance(item, self.item_type):
            raise TypeError(f"a {self.kind} registry takes a {self.item_type.__module__}.{self.item_type.__name__}, "
                            f"got {item!r}")
        current = self._items.get(item.name)
        if current is not None and not replace and current is not item and current != item:
            raise ValueError(f"{self.kind} {item.name!r} is already registered (pass replace=True to override it)")
        self._items[item.name] = item

    def get(self, name: str) -> T:
        """The item registered as ``name`` (this registry's unknown-name error if none)."""
        try:
            return self._items[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            raise self._unknown(name, self.names()) from None

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

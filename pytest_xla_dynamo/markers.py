"""The plugin's markers: their declarations, their validation at collection, and typed accessors.

:data:`MARKERS` is what ``pytest --markers`` shows. :func:`validate_item` checks every marker value of
one collected test and returns error lines (``nodeid: @pytest.mark.NAME: invalid value X; valid: ...``);
the plugin raises one ``pytest.UsageError`` for all of them before anything runs. The accessors
(:func:`marker_seed`, :func:`marker_tolerance`, :func:`marker_values`, :func:`item_modes`,
:func:`item_patches`, :func:`isolated_timeout`) are what hooks and fixtures read afterwards: they
trust the validation and never fail on a value it let through. No torch here.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.activation import MARKERS as _MARKERS
from pytest_xla_dynamo.config import (
    MODES,
    POSITIVE_FLOAT,
    SEED_MAX,
    TENSOR_MODES,
    did_you_mean,
    int_range,
    listing,
    positive_float,
)
from pytest_xla_dynamo.core import patches as _patches

MARKERS = _MARKERS  # declared in activation (imported by every session, dormant or not)

TOLERANCE_VALID = "both atol= and rtol= (finite numbers >= 0), or tol= (a finite number > 0), as keywords"
SEED_VALID = int_range(0, SEED_MAX)


# --- accessors ---------------------------------------------------------------------------------------


def marker_values(node: pytest.Item | pytest.Function | Any, name: str) -> list[Any] | None:
    """The positional values of ``node``'s closest ``name`` marker, flattened (``("a", "b")`` and
    ``(["a", "b"],)`` both give ``["a", "b"]``); None without the marker. ``node``: an item, or a
    ``Metafunc.definition``. Strings where :func:`validate_item` found no error."""
    marker = node.get_closest_marker(name)
    if marker is None:
        return None
    values: list[Any] = []
    for arg in marker.args:
        values.extend(arg if isinstance(arg, (list, tuple, set, frozenset)) else [arg])
    return values


def item_patches(item: pytest.Item | Any) -> list[str]:
    """The patch names of every ``xla_patch`` marker of the test (all levels add up), in order."""
    names: list[str] = []
    for marker in item.iter_markers("xla_patch"):
        names.extend(str(v) for v in marker.args)
    return list(dict.fromkeys(names))


def item_modes(item: pytest.Item | Any) -> list[str]:
    """The modes of the test's closest ``xla_mode`` marker (``[]`` without one)."""
    return [str(v) for v in marker_values(item, "xla_mode") or []]


def _int_seed(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value.lstrip("-").isdigit():
            return None
    if not isinstance(value, (int, str)):
        return None
    number = int(value)
    return number if 0 <= number <= SEED_MAX else None


def marker_seed(item: pytest.Item | Any, default: int) -> int:
    """The seed of ``@pytest.mark.xla_seed(seed)``, else ``default``."""
    marker = item.get_closest_marker("xla_seed")
    if marker is None or len(marker.args) != 1:
        return default
    seed = _int_seed(marker.args[0])
    return default if seed is None else seed


def _tolerance(marker: Any) -> dict[str, float] | str:
    """The marker's tolerance (``{"tol": x}`` or ``{"atol": a, "rtol": r}``), or what is wrong with it."""
    kwargs: Mapping[str, Any] = marker.kwargs
    if marker.args:
        return ", ".join(map(repr, marker.args)) + " (positional)"
    shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) or "(none)"
    if set(kwargs) not in ({"tol"}, {"atol", "rtol"}):
        return shown
    out: dict[str, float] = {}
    for key, value in kwargs.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return shown
        number = float(value)
        if key == "tol":
            if positive_float(number) is None:
                return shown
        elif not (math.isfinite(number) and number >= 0):
            return shown
        out[key] = number
    return out


def marker_tolerance(item: pytest.Item | Any) -> dict[str, float] | None:
    """``@pytest.mark.xla_tolerance``'s keywords as floats (``{"tol": x}`` or ``{"atol": a, "rtol": r}``),
    None without the marker (or with a bad one: :func:`validate_item` reports those)."""
    marker = item.get_closest_marker("xla_tolerance")
    if marker is None:
        return None
    found = _tolerance(marker)
    return found if isinstance(found, dict) else None


def isolated_timeout(item: pytest.Item | Any) -> float | None:
    """``@pytest.mark.xla_isolated(timeout=S)``'s seconds, None without the marker or the keyword."""
    marker = item.get_closest_marker("xla_isolated")
    if marker is None or marker.kwargs.get("timeout") is None:
        return None
    return positive_float(marker.kwargs["timeout"])


# --- validation --------------------------------------------------------------------------------------


def base_nodeid(item: pytest.Item | Any) -> str:
    """The node id without the parametrization (``test_a[x-y]`` -> ``test_a``): one error per test function."""
    callspec = getattr(item, "callspec", None)
    suffix = f"[{callspec.id}]" if callspec is not None else ""
    return item.nodeid[: -len(suffix)] if suffix and item.nodeid.endswith(suffix) else item.nodeid


def _choices(values: Iterable[Any], valid: Sequence[str], aliases: Mapping[str, str]) -> list[Any]:
    """The values not in ``valid`` (aliases allowed); an empty marker is one bad value, ``(none)``."""
    values = list(values)
    if not values:
        return ["(none)"]
    return [v for v in values if not isinstance(v, str) or aliases.get(v, v) not in valid]


def _valid(valid: Sequence[str]) -> str:
    return listing(valid)


def _hint(bad: Sequence[Any], valid: Sequence[str]) -> str:
    return did_you_mean([b for b in bad if isinstance(b, str) and b != "(none)"], valid)


def _line(item: Any, name: str, bad: str, valid: str) -> str:
    return f"{base_nodeid(item)}: @pytest.mark.{name}: invalid value {bad}; valid: {valid}"


def _shown(values: Iterable[Any]) -> str:
    return ", ".join(v if v == "(none)" else repr(v) for v in values)


def _keywords(marker: Any) -> str:
    """A marker's keyword arguments as the error shows them, ``""`` without: ``names=['a'] (a keyword; the
    names are positional)``."""
    if not marker.kwargs:
        return ""
    shown = ", ".join(f"{k}={v!r}" for k, v in marker.kwargs.items())
    if marker.name == "xla_mode":
        return f"{shown} (a keyword argument; the mode is positional: @pytest.mark.xla_mode('train'))"
    return f"{shown} (a keyword argument; the names are positional: @pytest.mark.{marker.name}('a', 'b'))"


def _choice_problem(item: Any, marker: Any, values: Sequence[Any], valid: Sequence[str],
                    aliases: Mapping[str, str]) -> str:
    """The error line of a marker naming choices (``values``, positional) that are not ``valid``, or given keywords
    (``""``: none)."""
    keywords = _keywords(marker)
    bad = [] if keywords and not values else _choices(values, valid, aliases)
    if not (keywords or bad):
        return ""
    shown = ", ".join(filter(None, (_shown(bad), keywords))) + _hint(bad, valid)
    return _line(item, marker.name, shown, _valid(valid))


def validate_item(item: pytest.Item | Any, *, backends: Sequence[str],
                  backend_aliases: Mapping[str, str] | None = None, models: Sequence[str] | None = None,
                  patches: Sequence[str] | None = None, modes: Sequence[str] = MODES,
                  tensor_modes: Sequence[str] = TENSOR_MODES) -> list[str]:
    """Every problem with the plugin's markers on ``item``, one line each (``[]``: all valid).

    ``backends`` (and their aliases) are the session's registry's, which the caller passes; the models and
    patches default to the model zoo and the patch registry (each as extended by the ``pytest_xla_register_*``
    hooks).
    """
    if models is None:
        models = zoo.model_names()
    if patches is None:
        patches = _patches.patch_names()
    errors: list[str] = []
    lists: tuple[tuple[str, Sequence[str], Mapping[str, str]], ...] = (
        ("xla_backend", backends, backend_aliases or {}),
        ("xla_models", models, {}),
        ("xla_tensor_mode", tensor_modes, {}),
        ("xla_mode", modes, {}),
    )
    for name, valid, aliases in lists:
        values = marker_values(item, name)
        if values is not None:
            problem = _choice_problem(item, item.get_closest_marker(name), values, valid, aliases)
            if problem:
                errors.append(problem)
            elif name == "xla_mode" and len(values) > 1:  # a test runs in one mode: train and infer are two tests
                errors.append(_line(item, name, _shown(values), f"one of {', '.join(valid)} (one mode per test; "
                                    "without the marker a test is tied to no mode)"))
    for marker in item.iter_markers("xla_patch"):  # every level adds patches
        problem = _choice_problem(item, marker, marker.args, patches, {})
        if problem:
            errors.append(problem)
    seed = item.get_closest_marker("xla_seed")
    if seed is not None and (len(seed.args) != 1 or seed.kwargs or _int_seed(seed.args[0]) is None):
        shown = _shown(list(seed.args) or ["(none)"]) + "".join(f", {k}={v!r}" for k, v in seed.kwargs.items())
        errors.append(_line(item, "xla_seed", shown, SEED_VALID))
    tolerance = item.get_closest_marker("xla_tolerance")
    if tolerance is not None:
        found = _tolerance(tolerance)
        if isinstance(found, str):
            errors.append(_line(item, "xla_tolerance", found, TOLERANCE_VALID))
    isolated = item.get_closest_marker("xla_isolated")
    if isolated is not None:
        unknown = [f"{k}={v!r}" for k, v in isolated.kwargs.items() if k != "timeout"]
        unknown += [repr(a) + " (positional)" for a in isolated.args]
        if unknown:
            errors.append(_line(item, "xla_isolated", ", ".join(unknown), f"timeout= ({POSITIVE_FLOAT} of seconds)"))
        timeout = isolated.kwargs.get("timeout")
        if timeout is not None and positive_float(timeout) is None:
            errors.append(_line(item, "xla_isolated", f"timeout={timeout!r}", f"timeout= {POSITIVE_FLOAT} (seconds)"))
    return errors


# --- what a test runs with ---------------------------------------------------------------------


def case_mode(item: pytest.Item, mode: str | None = None) -> str:
    """``mode`` if given, else the test's ``xla_mode`` marker (UsageError when neither says it)."""
    if mode is None:
        marker = item.get_closest_marker("xla_mode")
        if marker is None or len(marker.args) != 1:
            raise pytest.UsageError(f"{item.nodeid}: say the mode once: @pytest.mark.xla_mode('train' or "
                                    "'infer') on the test or module, or pass mode=")
        mode = str(marker.args[0])
    if mode not in MODES:
        raise pytest.UsageError(f"{item.nodeid}: invalid mode {mode!r}; valid: {', '.join(MODES)}")
    return mode


@contextlib.contextmanager
def activate(names: Iterable[str], *, required: bool = True) -> Iterator[list[str]]:
    """Activate ``names`` for one test (what the plugin's autouse fixture calls), yielding the active names.

    Without torch there is nothing to patch: a test that asked for patches (``required``) is skipped
    with the install hint; for any other test (patches that come from ``--xla-patch`` or
    ``REPLACE_MAXPOOL`` for the whole session) nothing happens and no patch is active.
    """
    names = list(dict.fromkeys(names))
    if _patches.torch_missing():
        if required:
            what = f"op patches ({', '.join(names)})" if names else "op patches (the xla_patches fixture)"
            pytest.skip(f"{what} need torch, not installed: {_patches.TORCH_HINT}")
        yield []
        return
    if not names:
        yield []
        return
    with _patches.apply_patches(names) as active:
        yield active


def for_test(item: pytest.Item, configured: Sequence[str]) -> contextlib.AbstractContextManager[list[str]]:
    """:func:`activate` for ``item``: the session's patches (``configured``) and the test's ``xla_patch``
    markers; the test requires them if it has such a marker or uses the ``xla_patches`` fixture."""
    marked = item_patches(item)
    required = bool(marked) or "xla_patches" in getattr(item, "fixturenames", ())
    return activate([*configured, *marked], required=required)

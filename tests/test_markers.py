"""markers.py, unit tests: every marker value checked at collection, and the typed accessors.

The items here carry real ``pytest.mark`` marks (closest first, as ``get_closest_marker`` sees them);
the sessions that turn these lines into one usage error are in test_faults.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_xla_dynamo import activation, markers
from pytest_xla_dynamo.session import get_session

VALID: dict[str, Any] = {"backends": ["trace_once", "eager"], "backend_aliases": {"openxla": "trace_once"},
         "models": ["resnet18", "tiny"], "patches": ["maxpool_to_avgpool", "dropout_to_identity"]}


class CallSpec:
    def __init__(self, id: str) -> None:
        self.id = id


class Item:
    """A collected test as :mod:`markers` sees it: its node id, its marks, its parametrization."""

    def __init__(self, *marks: pytest.MarkDecorator, nodeid: str = "t.py::test_x", param_id: str | None = None,
                 fixturenames: tuple[str, ...] = ()) -> None:
        self.own_markers = [m.mark for m in marks]
        self.callspec = CallSpec(param_id) if param_id is not None else None
        self.nodeid = nodeid + (f"[{param_id}]" if param_id is not None else "")
        self.fixturenames = fixturenames

    def iter_markers(self, name: str | None = None) -> Any:
        return (m for m in self.own_markers if name is None or m.name == name)

    def get_closest_marker(self, name: str) -> Any:
        return next(self.iter_markers(name), None)


def errors(*marks: pytest.MarkDecorator, **kwargs: Any) -> list[str]:
    return markers.validate_item(Item(*marks, **kwargs), **VALID)


m = pytest.mark


def test_valid_markers_have_no_errors() -> None:
    assert errors() == []
    assert errors(m.xla_backend("trace_once", "openxla"), m.xla_models(["resnet18", "tiny"]),
                  m.xla_tensor_mode("eager", "fake"), m.xla_mode("train"), m.xla_patch("maxpool_to_avgpool"),
                  m.xla_patch("dropout_to_identity"), m.xla_seed(0), m.xla_tolerance(tol=1e-3),
                  m.xla_isolated(timeout=5), m.xla_shared_case, m.xla, m.parametrize("x", [1])) == []
    assert errors(m.xla_seed(2**32 - 1), m.xla_seed("12"), m.xla_tolerance(atol=0, rtol=1e-5),
                  m.xla_isolated(timeout=0.5), m.xla_mode("infer")) == []
    assert errors(m.xla_isolated) == []


BAD = [
    (m.xla_seed("abc"), "xla_seed", "'abc'", "an integer 0..4294967295"),
    (m.xla_seed(2**32), "xla_seed", "4294967296", "an integer 0..4294967295"),
    (m.xla_seed(-1), "xla_seed", "-1", "an integer 0..4294967295"),
    (m.xla_seed(1.5), "xla_seed", "1.5", "an integer 0..4294967295"),
    (m.xla_seed(True), "xla_seed", "True", "an integer 0..4294967295"),
    (m.xla_seed(), "xla_seed", "(none)", "an integer 0..4294967295"),
    (m.xla_seed(1, 2), "xla_seed", "1, 2", "an integer 0..4294967295"),
    (m.xla_seed(seed=3), "xla_seed", "(none), seed=3", "an integer 0..4294967295"),
    (m.xla_tolerance("1e-3"), "xla_tolerance", "'1e-3' (positional)", markers.TOLERANCE_VALID),
    (m.xla_tolerance(1e-3), "xla_tolerance", "0.001 (positional)", markers.TOLERANCE_VALID),
    (m.xla_tolerance(tol="1e-3"), "xla_tolerance", "tol='1e-3'", markers.TOLERANCE_VALID),
    (m.xla_tolerance(tol=-1), "xla_tolerance", "tol=-1", markers.TOLERANCE_VALID),
    (m.xla_tolerance(tol=0), "xla_tolerance", "tol=0", markers.TOLERANCE_VALID),
    (m.xla_tolerance(tol=math.inf), "xla_tolerance", "tol=inf", markers.TOLERANCE_VALID),
    (m.xla_tolerance(atol=-1e-3, rtol=0), "xla_tolerance", "atol=-0.001, rtol=0", markers.TOLERANCE_VALID),
    (m.xla_tolerance(atol=math.nan, rtol=0), "xla_tolerance", "atol=nan, rtol=0", markers.TOLERANCE_VALID),
    (m.xla_tolerance(atol=1e-3), "xla_tolerance", "atol=0.001", markers.TOLERANCE_VALID),
    (m.xla_tolerance(tol=1, atol=1, rtol=1), "xla_tolerance", "tol=1, atol=1, rtol=1", markers.TOLERANCE_VALID),
    (m.xla_tolerance(rtol_=1), "xla_tolerance", "rtol_=1", markers.TOLERANCE_VALID),
    (m.xla_tolerance(), "xla_tolerance", "(none)", markers.TOLERANCE_VALID),
    (m.xla_mode("eval"), "xla_mode", "'eval'", "train, infer"),
    (m.xla_mode(), "xla_mode", "(none)", "train, infer"),
    (m.xla_backend("trace_once", "warp_drive"), "xla_backend", "'warp_drive'", "trace_once, eager"),
    (m.xla_models("resnet18", "nosuchnet"), "xla_models", "'nosuchnet'", "resnet18, tiny"),
    (m.xla_tensor_mode("real"), "xla_tensor_mode", "'real'", "eager, fake"),
    (m.xla_tensor_mode(), "xla_tensor_mode", "(none)", "eager, fake"),
    (m.xla_patch("no_such_patch", 3), "xla_patch", "'no_such_patch', 3", "maxpool_to_avgpool, dropout_to_identity"),
    (m.xla_isolated(timeout="abc"), "xla_isolated", "timeout='abc'", "timeout= a finite positive number (seconds)"),
    (m.xla_isolated(timeout=0), "xla_isolated", "timeout=0", "timeout= a finite positive number (seconds)"),
    (m.xla_isolated(timeout=-5), "xla_isolated", "timeout=-5", "timeout= a finite positive number (seconds)"),
    (m.xla_isolated(timeout=math.inf), "xla_isolated", "timeout=inf", "timeout= a finite positive number (seconds)"),
    (m.xla_isolated(timeout=True), "xla_isolated", "timeout=True", "timeout= a finite positive number (seconds)"),
    (m.xla_isolated(30), "xla_isolated", "30 (positional)", "timeout= (a finite positive number of seconds)"),
    (m.xla_isolated(timeuot=30), "xla_isolated", "timeuot=30", "timeout= (a finite positive number of seconds)"),
]


@pytest.mark.parametrize(("mark", "name", "shown", "valid"), BAD, ids=[f"{b[1]}-{b[2]}" for b in BAD])
def test_bad_values(mark: pytest.MarkDecorator, name: str, shown: str, valid: str) -> None:
    assert errors(mark) == [f"t.py::test_x: @pytest.mark.{name}: invalid value {shown}; valid: {valid}"]


def test_one_line_per_bad_marker_and_the_test_function_named_once() -> None:
    """Several bad markers give several lines; a parametrized test is named without its parameters,
    so the lines of its items are the same (the plugin keeps one)."""
    item_errors = errors(m.xla_seed("abc"), m.xla_mode("eval"), m.xla_patch("nope"), param_id="resnet18-eager")
    assert item_errors == [
        "t.py::test_x: @pytest.mark.xla_mode: invalid value 'eval'; valid: train, infer",
        "t.py::test_x: @pytest.mark.xla_patch: invalid value 'nope'; valid: maxpool_to_avgpool, dropout_to_identity",
        "t.py::test_x: @pytest.mark.xla_seed: invalid value 'abc'; valid: an integer 0..4294967295",
    ]
    assert errors(m.xla_seed("abc"), param_id="tiny-trace_once") == item_errors[2:]


def test_closest_marker_counts_but_every_patch_marker_is_checked() -> None:
    # the function's own xla_seed hides the module's: only the one in use is checked
    assert errors(m.xla_seed(1), m.xla_seed("module-level")) == []
    # xla_patch adds up over levels: each is checked
    assert len(errors(m.xla_patch("maxpool_to_avgpool"), m.xla_patch("bad"))) == 1
    # a misspelt patch gets the closest names, as the other markers' names do
    assert errors(m.xla_patch("maxpool_to_avgpol")) == [
        "t.py::test_x: @pytest.mark.xla_patch: invalid value 'maxpool_to_avgpol' (did you mean 'maxpool_to_avgpool'?); "
        "valid: maxpool_to_avgpool, dropout_to_identity"]


def test_valid_values_default_to_the_registries(pytestconfig: pytest.Config) -> None:
    """The session's backend registry (this session's, as the plugin passes it); without explicit lists, the zoo
    and the patch registry."""
    item = Item(m.xla_patch("nope"), m.xla_models("nosuchnet"), m.xla_backend("openxla", "nope"))
    item.config = pytestconfig  # type: ignore[attr-defined]
    registry = get_session(pytestconfig).backends
    found = markers.validate_item(item, backends=registry.names(), backend_aliases=registry.aliases)
    assert any("xla_patch: invalid value 'nope'; valid: maxpool_to_avgpool, dropout_to_identity" in e
               for e in found), found
    assert any("xla_models: invalid value 'nosuchnet'; valid: " in e and "resnet18" in e for e in found), found
    assert any("xla_backend: invalid value 'nope'; valid: trace_once" in e for e in found), found
    assert len(found) == 3


# --- accessors ------------------------------------------------------------------------------------


def test_marker_values() -> None:
    assert markers.marker_values(Item(), "xla_backend") is None
    assert markers.marker_values(Item(m.xla_backend("a", "b")), "xla_backend") == ["a", "b"]
    assert markers.marker_values(Item(m.xla_backend(["a", "b"], ("c",))), "xla_backend") == ["a", "b", "c"]
    assert markers.marker_values(Item(m.xla_backend()), "xla_backend") == []


def test_item_modes_and_patches() -> None:
    assert markers.item_modes(Item()) == []
    assert markers.item_modes(Item(m.xla_mode("train"), m.xla_mode("infer"))) == ["train"]
    assert markers.item_patches(Item()) == []
    assert markers.item_patches(Item(m.xla_patch("b", "a"), m.xla_patch("a", "c"))) == ["b", "a", "c"]


def test_marker_seed() -> None:
    assert markers.marker_seed(Item(), 1337) == 1337
    assert markers.marker_seed(Item(m.xla_seed(5)), 1337) == 5
    assert markers.marker_seed(Item(m.xla_seed("6")), 1337) == 6
    assert markers.marker_seed(Item(m.xla_seed(0)), 1337) == 0


def test_marker_tolerance() -> None:
    assert markers.marker_tolerance(Item()) is None
    assert markers.marker_tolerance(Item(m.xla_tolerance(tol=1e-2))) == {"tol": 1e-2}
    got = markers.marker_tolerance(Item(m.xla_tolerance(atol=1e-3, rtol=0)))
    assert got == {"atol": 1e-3, "rtol": 0.0}
    assert got is not None and all(isinstance(v, float) for v in got.values())


def test_isolated_timeout() -> None:
    assert markers.isolated_timeout(Item()) is None
    assert markers.isolated_timeout(Item(m.xla_isolated)) is None
    assert markers.isolated_timeout(Item(m.xla_isolated(timeout=3))) == 3.0
    assert markers.isolated_timeout(Item(m.xla_isolated(timeout="2.5"))) == 2.5


def test_base_nodeid() -> None:
    assert markers.base_nodeid(Item(nodeid="a/t.py::C::test_y", param_id="x-y")) == "a/t.py::C::test_y"
    assert markers.base_nodeid(Item(nodeid="t.py::test_z")) == "t.py::test_z"


def test_declarations() -> None:
    names = [line.split(":")[0].split("(")[0] for line in markers.MARKERS]
    assert names == ["xla", "xla_backend", "xla_mode", "xla_models", "xla_tensor_mode", "xla_patch", "xla_tolerance",
                     "xla_seed", "xla_known_issue", "xla_isolated", "xla_shared_case", "xdist_group"]
    lines: list[tuple[str, str]] = []

    class Config:
        def addinivalue_line(self, name: str, line: str) -> None:
            lines.append((name, line))

    activation.register_markers(Config())  # type: ignore[arg-type]  # the declarations moved there (issue 28)
    assert lines == [("markers", line) for line in markers.MARKERS]

"""The localization's comparison of module outputs (pure parts, issue 27): a call whose hook did not fire on the
backend is skipped, never named as the first diverging output."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_a_call_the_backend_did_not_observe_is_never_the_culprit() -> None:
    from pytest_xla_dynamo.parity.compare import Tolerance
    from pytest_xla_dynamo.parity.localize import _first_output

    a, b, c = torch.ones(3), torch.full((3,), 2.0), torch.full((3,), 3.0)
    ref = [("stem.0", a), ("stem.1", b), ("head", c)]
    fp64 = [(name, t.double()) for name, t in ref]
    # the backend's hooks saw stem.1 and head only (as under dynamo, where a hook may not fire); head diverges
    res = [("stem.1", b.clone()), ("head", c + 1)]
    found = _first_output(ref, fp64, res, Tolerance())
    assert found is not None
    index, name, problem, previous = found
    assert (index, name, previous) == (2, "head", "stem.1") and "max abs err" in problem
    # nothing observed diverges: no culprit at all (never "stem.0: not called on the backend")
    assert _first_output(ref, fp64, [("stem.1", b.clone())], Tolerance()) is None
    assert _first_output(ref, fp64, [], Tolerance()) is None

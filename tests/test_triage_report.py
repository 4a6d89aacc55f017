"""The triage's rendering (pure): the header, the one line, JSON, the compact torch error of a chained
exception, and the header put on pytest's own failure report in the auto and long styles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _pytest._code.code import ExceptionChainRepr

from pytest_xla_dynamo.core.stages import stage
from pytest_xla_dynamo.known_issues.registry import parse_entry
from pytest_xla_dynamo.triage import Triage
from pytest_xla_dynamo.triage.longrepr import decorate, error_lines, short_path

VERSIONS = {"torch": "2.9.0", "torch_xla": "2.9.0"}
ENTRY = parse_entry({"id": "pytorch/xla#3361", "title": "backward through BatchNorm2d in eval() mode fails",
                     "url": "https://github.com/pytorch/xla/issues/3361", "kind": "error", "raises": "RuntimeError",
                     "match": "The size of mean should be compatible"}, source="test")


def _raise_in_backward() -> RuntimeError:
    try:
        try:
            raise ValueError("inner cause\nsecond line")
        except ValueError as cause:
            with stage("backward", step=1, phase="parity", backend="trace_everytime"):
                raise RuntimeError("The size of mean should be compatible with feature count, but 0 and 4") from cause
    except RuntimeError as exc:
        return exc
    raise AssertionError("unreachable")


def _triage(exc: BaseException, **fields: object) -> Triage:
    data: dict[str, object] = {"model": "frozen_bn", "backend": "trace_everytime", "mode": "train",
                               "status": "fail_to_run", "repro": "pytest t.py::test_x --xla-backend=trace_everytime"}
    data.update(fields)
    return Triage.from_exception(exc, test="test_x", nodeid="t.py::test_x", **data)


def test_header_of_a_matched_error() -> None:
    triage = _triage(_raise_in_backward()).analyze([ENTRY], VERSIONS)
    header = triage.header()
    assert header[0] == "xla-dynamo triage: frozen_bn / trace_everytime / train (fail_to_run)"
    assert header[1] == "  stage:     backward of parity step 1 on trace_everytime"
    assert header[2].startswith("  error:     RuntimeError: The size of mean should be compatible")
    assert any("matches known issue pytorch/xla#3361: backward through BatchNorm2d" in h for h in header)
    assert any("declare it: @pytest.mark.xla_known_issue('pytorch/xla#3361') on test_x" in h for h in header)
    assert header[-1] == "  reproduce: pytest t.py::test_x --xla-backend=trace_everytime"
    assert len(header) < 30
    assert triage.line() == "backward; matches pytorch/xla#3361"
    data = json.loads(json.dumps(triage.to_dict()))
    assert data["where"] == {"stage": "backward", "step": 1, "phase": "parity", "backend": "trace_everytime"}
    assert data["matches"][0]["id"] == "pytorch/xla#3361" and data["exception"] == "RuntimeError"


def test_header_without_a_match_offers_a_new_entry() -> None:
    triage = _triage(RuntimeError("never seen")).analyze([ENTRY], VERSIONS)
    text = "\n".join(triage.header())
    assert "stage:     not in a case step" in text
    assert "no entry of the registry matches" in text and "[[issue]]" in text
    assert "id = 'local:frozen-bn-runtimeerror'" in text


def test_verdict_without_proposal() -> None:
    """A failure the harness can explain (a harness artefact, eager's fast path, ill-conditioning) says so on a
    verdict line and proposes no new entry."""
    triage = _triage(RuntimeError("never seen"), status="fail_graph")
    triage.verdict, triage.classification = ["the case has no snapshot yet"], "harness"
    triage.no_proposal = "a harness artefact"
    triage.analyze([ENTRY], VERSIONS)
    text = "\n".join(triage.header())
    assert "  verdict:   the case has no snapshot yet" in text
    assert "no known-issue entry proposed: a harness artefact" in text and "[[issue]]" not in text
    assert triage.line() == "outside a step; the case has no snapshot yet; no known issue proposed"
    assert triage.to_dict()["classification"] == "harness"


def test_declared_failure_has_no_snippet() -> None:
    triage = _triage(_raise_in_backward(), known="pytorch/xla#3361", known_action="xfail").analyze([ENTRY], VERSIONS)
    text = "\n".join(triage.header())
    assert "registry: pytorch/xla#3361 applies to this test (strict xfail)" in text
    assert "[[issue]]" not in text


def test_error_lines_cause_first() -> None:
    lines = error_lines(_raise_in_backward())
    assert lines[1] == "  ValueError: inner cause" and lines[2] == "    second line"
    assert lines[3] == "  which caused:"
    assert lines[5].startswith("  RuntimeError: The size of mean")
    assert short_path("/x/lib/python3.11/site-packages/torch/autograd/graph.py") == "torch/autograd/graph.py"


@pytest.mark.parametrize("style", ["auto", "long"])
def test_decorate(style: str) -> None:
    exc = _raise_in_backward()
    info = pytest.ExceptionInfo.from_exception(exc)
    longrepr = info.getrepr(style="long", chain=True)
    assert isinstance(longrepr, ExceptionChainRepr)

    class Rep:
        pass

    rep = Rep()
    rep.longrepr = longrepr  # type: ignore[attr-defined]
    triage = _triage(exc).analyze([ENTRY], VERSIONS)
    decorate(rep, triage.header(), info, style=style, test_path=Path(__file__), tag="backward; pytorch/xla#3361")
    new = rep.longrepr  # type: ignore[attr-defined]
    assert isinstance(new, ExceptionChainRepr)
    assert new.reprcrash is not None and new.reprcrash.message.startswith("[backward; pytorch/xla#3361] RuntimeError")
    text = "".join(new.chain[0][0].reprentries[0].lines)
    assert text.startswith("xla-dynamo triage: frozen_bn")
    if style == "auto":
        assert len(new.chain) == 1 and "torch's error (--tb=long" in text
        assert f"test:      {Path(__file__).name}:" in text  # the test's own line
    else:
        assert len(new.chain) == 1 + len(longrepr.chain)  # pytest's report kept whole after the header

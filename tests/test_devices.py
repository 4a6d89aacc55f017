"""Tests of pytest_xla_dynamo.core.devices: a failed or interrupted XLA runtime bring-up is reported once and
does not poison later tests; torch's structured-trace records stay out of captured logs.

The sessions are real (pytester subprocesses with torch_xla): a bring-up that fails (``PJRT_DEVICE``
naming no device), one that pytest-timeout interrupts in the middle of ``import torch_xla`` (which
leaves torch_xla half-imported: re-importing it raises ``NameError: name 'runtime' is not defined``),
and a failing compiled test whose captured log must not hold ``torch.__trace`` lines.
"""

from __future__ import annotations

import logging
import re
import sys
import types

import pytest
from sample_data import before_summary

from pytest_xla_dynamo.core import devices

pytest_plugins = ["pytester"]

needs_xla = pytest.mark.skipif(devices.skip_reason() is not None, reason=str(devices.skip_reason()))


# --- units ------------------------------------------------------------------------------------------


class _Collect(logging.Handler):
    """Keeps what reaches it (as pytest's capture handler on the logger itself would)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)



def test_the_trace_filter_drops_records_unless_torch_trace_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCH_TRACE", raising=False)
    monkeypatch.delenv("TORCH_DTRACE", raising=False)
    logger = logging.getLogger(devices.TRACE_LOGGER)
    monkeypatch.setattr(logger, "filters", list(logger.filters))  # restored afterwards
    handler = _Collect()
    seen = handler.records
    logger.addHandler(handler)
    monkeypatch.setattr(logger, "level", logging.DEBUG)
    try:
        devices.quiet_torch_trace()
        devices.quiet_torch_trace()
        assert len([f for f in logger.filters if isinstance(f, devices._DropTorchTrace)]) == 1  # idempotent
        logger.debug("", extra={"metadata": {"x": 1}})
        assert seen == []
        monkeypatch.setenv("TORCH_TRACE", "/tmp/trace-dir")  # a user who asked for traces gets them
        logger.debug("", extra={"metadata": {"x": 2}})
        assert len(seen) == 1
    finally:
        logger.removeHandler(handler)


def test_a_failed_bring_up_is_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "_failure", "XLA runtime bring-up failed (PJRT_DEVICE=X): boom")
    assert not devices.xla_available()
    assert devices.skip_reason() == devices.bringup_failure() == "XLA runtime bring-up failed (PJRT_DEVICE=X): boom"
    with pytest.raises(devices.RuntimeUnavailable, match="boom"):
        devices.ensure_runtime()


def test_a_traceback_entry_without_a_line_is_left_out() -> None:
    """A frame stopped by a signal at an instruction without a line (tb_lineno None) would make pytest's
    report rendering fail; the interruption is re-raised without that entry, the others kept in order."""
    frame = sys._getframe()
    last = types.TracebackType(None, frame, 0, 7)
    lineless = types.TracebackType(last, frame, 10**6, -1)  # an instruction index past the code: no line
    first = types.TracebackType(lineless, frame, 0, 3)
    assert lineless.tb_lineno in (None, -1)  # None; -1 on early 3.11 releases (3.11.2)
    kept = devices.renderable_traceback(first)
    lines = []
    while kept is not None:
        lines.append(kept.tb_lineno)
        kept = kept.tb_next
    assert lines == [3, 7]
    assert devices.renderable_traceback(None) is None
    # and in the exceptions chained to the interruption
    inner, outer = ValueError("inner"), KeyboardInterrupt()
    inner.__traceback__ = types.TracebackType(None, frame, 10**6, -1)
    outer.__context__ = inner
    outer.__traceback__ = first
    devices.make_renderable(outer)
    assert inner.__traceback__ is None and outer.__traceback__ is not None


# --- sessions ---------------------------------------------------------------------------------------

BRING_UP = """
import torch  # imported at collection: only the runtime bring-up runs in the first test
import pytest

def test_first(xla_device):
    pass

def test_second(xla_device):
    pass

@pytest.mark.xla
def test_marked():
    import torch_xla
    torch_xla.device()

def test_plain():
    assert torch.ones(2).sum().item() == 2
"""


def _skipped(out: str, reason: str) -> int:
    """How many tests the ``-rs`` summary lists as skipped for ``reason`` (a regex)."""
    return sum(int(n) for n in re.findall(rf"SKIPPED \[(\d+)\] \S+: {reason}", out))


def _no_name_error(out: str) -> None:
    assert "NameError" not in out and "name 'runtime' is not defined" not in out, out[-3000:]
    assert "INTERNALERROR" not in out


@needs_xla
def test_a_failed_bring_up_is_reported_once_and_later_xla_tests_skip(pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PJRT_DEVICE", "NO_SUCH_DEVICE")
    pytester.makepyfile(test_bring_up=BRING_UP)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rsE", timeout=600)
    out = result.stdout.str()
    result.assert_outcomes(errors=1, skipped=2, passed=1)
    _no_name_error(out)
    # the first XLA test reports the error once, with how to fix it
    assert before_summary(out).count(
        "RuntimeUnavailable: XLA runtime bring-up failed (PJRT_DEVICE=NO_SUCH_DEVICE): RuntimeError: "
        "No PjRtPlugin registered for: NO_SUCH_DEVICE") == 1, out[-3000:]
    assert "Fix: check that PJRT_DEVICE names a device this machine has" in out
    result.stdout.fnmatch_lines(["ERROR test_bring_up.py::test_first*"], consecutive=False)
    # the later XLA tests skip with that reason; the plain test runs
    assert _skipped(out, r"XLA runtime bring-up failed \(PJRT_DEVICE=NO_SUCH_DEVICE\)") == 2, out[-3000:]


@needs_xla
def test_an_interrupted_bring_up_does_not_poison_later_tests(pytester: pytest.Pytester) -> None:
    """pytest-timeout fires in the middle of ``import torch_xla`` (it takes seconds): that test fails with
    the timeout and says why the XLA tests after it skip; no later test sees the half-imported torch_xla."""
    pytest.importorskip("pytest_timeout")
    pytester.makepyfile(test_bring_up=BRING_UP)
    result = pytester.runpytest_subprocess("--timeout=1", "--timeout-method=signal", "-p", "no:randomly",
                                           "-p", "no:cacheprovider", "-rsE", timeout=600)
    out = result.stdout.str()
    result.assert_outcomes(errors=1, skipped=2, passed=1)
    _no_name_error(out)
    assert "Timeout (>1.0s) from pytest-timeout" in out
    assert "XLA runtime bring-up was interrupted (Failed: Timeout (>1.0s) from pytest-timeout.)" in out
    assert _skipped(out, r"XLA runtime bring-up was interrupted") == 2, out[-3000:]


TRACE_NOISE = """
import logging
import torch

def test_compiled_and_failing(xla_device):
    logging.getLogger("demo").warning("VISIBLE-LOG-LINE")
    fn = torch.compile(lambda x: x * 2 + 1, backend="openxla")
    assert fn(torch.ones(4, device=xla_device)).sum().item() == 0  # 12: fails, showing the captured log
"""


@needs_xla
def test_a_failing_compiled_test_has_no_torch_trace_lines_in_its_log(pytester: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCH_TRACE", raising=False)
    pytester.makepyfile(test_noise=TRACE_NOISE)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", timeout=900)
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert "Captured log call" in out and "VISIBLE-LOG-LINE" in out  # the log is captured and shown
    assert "torch.__trace" not in out, out[-3000:]

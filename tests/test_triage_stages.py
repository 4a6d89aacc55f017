"""Stages written on exceptions (pure): the innermost stage wins, the exception goes on unchanged, causes are
followed, compile failures are told apart by their class, and the text a person reads."""

from __future__ import annotations

import pytest

from pytest_xla_dynamo.core.stages import Where, class_names, compile_part, mark, stage, where_of


class BackendCompilerFailed(RuntimeError):  # named like dynamo's: only the class name counts
    pass


class Unsupported(RuntimeError):
    pass


def test_stage_marks_and_reraises_the_same_exception() -> None:
    error = RuntimeError("boom")
    with pytest.raises(RuntimeError) as info, stage("forward", step=1, phase="warm-up", backend="trace_once"):
        raise error
    assert info.value is error
    assert where_of(error) == Where("forward", 1, "warm-up", "trace_once")


def test_innermost_stage_wins_and_causes_are_followed() -> None:
    with pytest.raises(ValueError) as info, stage("sync"), stage("backward", step=2):
        raise ValueError("inner")
    assert where_of(info.value) == Where("backward", 2)
    outer = KeyError("outer")
    outer.__cause__ = info.value
    assert where_of(outer) == Where("backward", 2)  # found on the cause
    assert where_of(KeyError("nothing")) is None


def test_keyboard_interrupt_is_left_alone() -> None:
    with pytest.raises(KeyboardInterrupt) as info, stage("forward"):
        raise KeyboardInterrupt
    assert where_of(info.value) is None


def test_mark_keeps_an_earlier_stage() -> None:
    exc = RuntimeError("x")
    mark(exc, Where("loss"))
    mark(exc, Where("forward"))
    assert where_of(exc) == Where("loss")


@pytest.mark.parametrize(("exc", "part"), [
    (BackendCompilerFailed("x"), "the dynamo backend's compile"),
    (Unsupported("x"), "dynamo's tracing"),
    (RuntimeError("x"), ""),
])
def test_compile_part_by_class_name(exc: BaseException, part: str) -> None:
    assert compile_part(exc) == part


def test_describe_and_class_names() -> None:
    where = Where("backward", 1, "warm-up", "trace_once")
    assert where.describe() == "backward of warm-up step 1 on trace_once"
    assert where.describe(compile_part(BackendCompilerFailed("x"))) == (
        "backward of warm-up step 1 on trace_once, during the dynamo backend's compile")
    assert Where("build", phase="eager reference").describe() == "build (eager reference)"
    names = class_names(BackendCompilerFailed("x"))
    assert names[:2] == ["BackendCompilerFailed", f"{__name__}.BackendCompilerFailed"]
    assert "RuntimeError" in names and "builtins.RuntimeError" in names and "builtins.object" not in names

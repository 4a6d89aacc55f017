"""Tests of ``--xla-cpu-isa`` (pytest_xla_dynamo.workers.cpu_isa): the settings it makes, what it leaves to the
environment, its usage errors, and, in pytest sessions with and without xdist, that torch's kernels run
capped in XLA tests (ATen's dispatch reports the capability it took); an explicit cap that comes too late is a
usage error, the default's a remark. That a session without XLA tests is not capped: tests/test_activation.py.
The cap's effect on a parity verdict is checked by the suites: timm cspresnet50's reproducer fails as recorded
only under the cap (docs/zoo.md)."""

from __future__ import annotations

import os

import pytest

from pytest_xla_dynamo.workers import cpu_isa
from pytest_xla_dynamo.workers.cpu_isa import ISA_VARIABLES, apply_isa, conflicts, current

pytest_plugins = ["pytester"]


def test_avx2_sets_onednn_aten_and_an_xla_flag_beside_the_others() -> None:
    env = {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}
    done = apply_isa("avx2", explicit=False, environ=env, machine="x86_64")
    assert env == {"XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_cpu_max_isa=AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                   "ATEN_CPU_CAPABILITY": "avx2"}
    assert done == "ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, --xla_cpu_max_isa=AVX2"
    assert current("--xla_cpu_max_isa", env) == "AVX2" and conflicts("avx2", env) == {}
    # applying again (an xdist worker inherits the controller's settings) changes nothing
    assert apply_isa("avx2", explicit=True, environ=env, machine="x86_64") == done
    assert env["XLA_FLAGS"].count("xla_cpu_max_isa") == 1


def test_native_and_non_x86_machines_set_nothing() -> None:
    env: dict[str, str] = {}
    assert apply_isa("native", explicit=True, environ=env, machine="x86_64") == "native (no cap set)"
    assert apply_isa("avx2", explicit=False, environ=env, machine="aarch64").startswith("not set: aarch64")
    assert env == {}


def test_the_environments_own_setting_wins_over_the_default_and_contradicts_an_explicit_choice() -> None:
    env = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "XLA_FLAGS": "--xla_cpu_max_isa=AVX512"}
    done = apply_isa("avx2", explicit=False, environ=env, machine="x86_64")
    assert done == ("not set: the environment's ONEDNN_MAX_CPU_ISA=AVX512_CORE, --xla_cpu_max_isa=AVX512 kept "
                    "(avx2 is the default)")
    assert env == {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "XLA_FLAGS": "--xla_cpu_max_isa=AVX512"}  # no mix
    with pytest.raises(pytest.UsageError) as err:
        apply_isa("avx2", explicit=True, environ=dict(env), machine="x86_64")
    assert str(err.value) == (
        "--xla-cpu-isa=avx2 sets ONEDNN_MAX_CPU_ISA=AVX2, --xla_cpu_max_isa=AVX2, but the environment has "
        "ONEDNN_MAX_CPU_ISA=AVX512_CORE, --xla_cpu_max_isa=AVX512; unset it, or pass --xla-cpu-isa=native to "
        "keep the environment's (valid: avx2, avx512, native)")
    # the avx512 choice agrees with it
    assert conflicts("avx512", env) == {}


def test_every_choice_caps_the_three_libraries_or_none() -> None:
    for isa, settings in ISA_VARIABLES.items():
        assert set(settings) in ({"ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "--xla_cpu_max_isa"}, set()), isa
    assert set(cpu_isa.SETTINGS) == set(ISA_VARIABLES["avx2"])
    assert cpu_isa.DEFAULT_CPU_ISA == "avx2" and set(cpu_isa.CPU_ISAS) == {"avx2", "avx512", "native"}


def test_the_report_names_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    # the settings as the session's XLA tests have them (the cap applied, on a copy), not this process's
    # environment: an xdist controller reports what its workers set
    entry = cpu_isa.isa_environment("avx2")
    assert entry["choice"] == "avx2" and entry["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert entry["ATEN_CPU_CAPABILITY"] == ("avx2" if cpu_isa.is_x86() else None)
    assert "ATEN_CPU_CAPABILITY" not in os.environ
    # without a choice, the environment's as it is
    entry = cpu_isa.isa_environment(None)
    assert entry["choice"] is None and entry["ONEDNN_MAX_CPU_ISA"] == "AVX2" and entry["ATEN_CPU_CAPABILITY"] is None
    assert entry["cpu"]["model"] and isinstance(entry["cpu"]["flags"], list)


CHECK = """
import os
import pytest

@pytest.mark.xla
def test_capped():
    import torch
    assert os.environ["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert "--xla_cpu_max_isa=AVX2" in os.environ["XLA_FLAGS"].split()
    assert torch.backends.cpu.get_cpu_capability() == "AVX2"
"""
NATIVE = """
import os

def test_not_capped():
    assert "ONEDNN_MAX_CPU_ISA" not in os.environ and "xla_cpu_max_isa" not in os.environ.get("XLA_FLAGS", "")
"""


@pytest.mark.skipif(not cpu_isa.is_x86() or "avx2" not in cpu_isa.cpu_description()["flags"],
                    reason="needs an x86 CPU with AVX2 (the cap applies there only)")
def test_sessions_run_torch_capped_with_and_without_xdist(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "XLA_FLAGS", "PYTEST_XLA_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_check=CHECK, test_native=NATIVE)
    # the plugin turned on at the test (late), at start-up by an option (eager), under xdist
    for args in (["-p", "no:xdist"], ["-p", "no:xdist", "--xla-seed=7"], ["-n", "2"]):
        result = pytester.runpytest_subprocess("test_check.py", *args)
        assert result.ret == 0, result.stdout.str()
        result.stdout.fnmatch_lines(["xla-dynamo cpu isa: ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, "
                                     "--xla_cpu_max_isa=AVX2 (*"])
    # without xdist the line comes after collection, where the cap was set; the controller says what its
    # workers set
    result.stdout.fnmatch_lines(["xla-dynamo cpu isa: * in the workers that run XLA tests"])
    monkeypatch.setenv("PYTEST_XLA_CPU_ISA", "native")
    result = pytester.runpytest_subprocess("test_native.py", "-p", "no:xdist")
    assert result.ret == 0, result.stdout.str()
    result = pytester.runpytest_subprocess("test_native.py", "--xla-cpu-isa=avx3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --xla-cpu-isa: invalid value 'avx3'; valid: avx2, avx512, native"])
    assert "Traceback" not in result.stderr.str()


def test_a_cap_set_after_torch_chose_its_kernels_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    have = str(torch.backends.cpu.get_cpu_capability()).lower()
    isa = "avx512" if have == "avx2" else "avx2"
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", ISA_VARIABLES[isa]["ATEN_CPU_CAPABILITY"])
    assert f"torch already chose {have} kernels in this process" in cpu_isa.too_late(isa)
    assert cpu_isa.too_late("native") == ""


def test_the_environments_own_setting_in_another_case_is_no_contradiction() -> None:
    env = {"ONEDNN_MAX_CPU_ISA": "avx2", "ATEN_CPU_CAPABILITY": "AVX2"}
    assert conflicts("avx2", env) == {}
    done = apply_isa("avx2", explicit=True, environ=env, machine="x86_64")  # no UsageError
    assert env == {"ONEDNN_MAX_CPU_ISA": "avx2", "ATEN_CPU_CAPABILITY": "AVX2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}
    assert done == "ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, --xla_cpu_max_isa=AVX2"
    assert cpu_isa.same_setting(cpu_isa.kernel_setting("avx2", env, machine="x86_64"), done)


def test_the_kernel_setting_is_what_the_xla_tests_run_with() -> None:
    assert cpu_isa.kernel_setting("avx2", {}, machine="x86_64") == (
        "ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, --xla_cpu_max_isa=AVX2")
    assert cpu_isa.kernel_setting("native", {}, machine="x86_64") == cpu_isa.UNCAPPED
    assert cpu_isa.kernel_setting("avx2", {}, machine="aarch64") == cpu_isa.UNCAPPED
    mine = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}  # the environment's own choice, kept with the default
    assert cpu_isa.kernel_setting("avx2", mine, machine="x86_64") == "ONEDNN_MAX_CPU_ISA=AVX512_CORE"
    assert mine == {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}  # computed on a copy
    assert cpu_isa.same_setting("A=1, b=X", "B=x,a=1") and not cpu_isa.same_setting("A=1", "A=1, B=2")


# a conftest.py that runs a torch op before the tests, on kernels that are not the cap's (ATen's baseline
# kernels, chosen through its own variable, then removed: on any x86 machine not what avx2 asks for)
EARLY_TORCH = """
import os
import torch

os.environ["ATEN_CPU_CAPABILITY"] = "default"
torch.ones(8).add_(1)  # ATen chooses its kernels now, once for the process
del os.environ["ATEN_CPU_CAPABILITY"]
"""
EARLY_TESTS = """
import pytest

@pytest.mark.xla
def test_xla():
    pass

def test_plain():
    pass
"""


@pytest.mark.skipif(not cpu_isa.is_x86(), reason="the cap applies on x86 only")
def test_an_explicit_cap_that_comes_too_late_is_a_usage_error(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "XLA_FLAGS", "PYTEST_XLA_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(EARLY_TORCH)
    pytester.makepyfile(test_early=EARLY_TESTS)
    result = pytester.runpytest_subprocess("--xla-cpu-isa=avx2", "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(["ERROR: --xla-cpu-isa=avx2 cannot take effect: torch already chose default kernels "
                                 "in this process, so its XLA tests would run on other kernels than asked. *"
                                 "--xla-cpu-isa=native to run on the kernels torch chose (valid: avx2, avx512, "
                                 "native)"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "passed" not in result.stdout.str()  # nothing ran
    # under xdist the controller says it, before any worker starts (its conftest ran what theirs would)
    result = pytester.runpytest_subprocess("--xla-cpu-isa=avx2", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(["ERROR: --xla-cpu-isa=avx2 cannot take effect: torch already chose default *"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    # from the environment too, named as such
    monkeypatch.setenv("PYTEST_XLA_CPU_ISA", "avx2")
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(["ERROR: --xla-cpu-isa (env PYTEST_XLA_CPU_ISA)=avx2 cannot take effect: *"])
    # no XLA test selected: the cap is not needed, so it is no error
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-k", "plain")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    # the default cap that comes too late stays a remark
    monkeypatch.delenv("PYTEST_XLA_CPU_ISA")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-k", "xla")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["xla-dynamo cpu isa: ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2, "
                                 "--xla_cpu_max_isa=AVX2 (torch already chose default kernels in this process; "
                                 "avx2 is the default) (*", "*1 passed*"])

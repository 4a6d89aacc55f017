"""Tests of pytest_xla_dynamo.activation: a session that does not use the plugin is the session it would be
without it (issue 28), on real torch and torch_xla: the same environment, CPU capability, threads and modules
as with ``-p no:xla_dynamo``, with and without xdist; where the plugin turns on (at configure, or at the first
collected test that uses it), and that an XLA session still gets its effects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_xla_dynamo import activation, markers

pytest_plugins = ["pytester"]

# a plain torch test: matmuls on CPU eager, and what the process looks like while it runs
PROBE = """
import json
import os
import subprocess
import sys

import torch


def test_plain_torch():
    x = torch.randn(128, 128)
    for _ in range(20):
        x = torch.tanh(x @ x)
    assert torch.isfinite(x).all()
    with open("/proc/self/status") as f:
        threads = next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
    child = subprocess.run([sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
                           capture_output=True, text=True, check=True)
    probe = {"env": dict(os.environ), "child_env": json.loads(child.stdout),
             "capability": torch.backends.cpu.get_cpu_capability(), "torch_threads": torch.get_num_threads(),
             "os_threads": threads, "modules": sorted(m for m in sys.modules
                                                      if m.split(".")[0] in ("torch_xla", "pytest_xla_dynamo"))}
    name = "probe-" + os.environ.get("PYTEST_XDIST_WORKER", "main") + ".json"
    with open(os.path.join(os.environ["PROBE_DIR"], os.environ["PROBE_RUN"], name), "w") as f:
        json.dump(probe, f)
"""
# what differs between any two sessions, plugin or not
VOLATILE = ("PROBE_RUN", "PYTEST_CURRENT_TEST", "PYTEST_XDIST_TESTRUNUID")
# what the plugin may import in a session that does not use it: its entry point and what declares its options
DORMANT_MODULES = ["pytest_xla_dynamo", "pytest_xla_dynamo.activation", "pytest_xla_dynamo.hookspecs",
                   "pytest_xla_dynamo.options", "pytest_xla_dynamo.plugin", "pytest_xla_dynamo.timing",
                   "pytest_xla_dynamo.timing.options"]


def _probe(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run: str, *args: str) -> dict[str, Any]:
    folder = pytester.path / "probes" / run
    folder.mkdir(parents=True)
    monkeypatch.setenv("PROBE_RUN", run)
    result = pytester.runpytest_subprocess("test_probe.py", "-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    out = result.stdout.lines
    files = sorted(folder.glob("probe-*.json"))
    assert len(files) == 1, files
    probe = json.loads(files[0].read_text())
    for key in ("env", "child_env"):
        probe[key] = {k: v for k, v in probe[key].items() if k not in VOLATILE}
    probe["plugin_lines"] = [line for line in out if line.startswith("xla-dynamo")]
    return probe


def _same_process(with_plugin: dict[str, Any], without: dict[str, Any]) -> None:
    assert with_plugin["env"] == without["env"]
    assert with_plugin["child_env"] == without["child_env"]  # nothing inherited by a subprocess either
    assert with_plugin["capability"] == without["capability"]
    assert with_plugin["torch_threads"] == without["torch_threads"]
    assert with_plugin["os_threads"] == without["os_threads"]
    assert not any(m.startswith("torch_xla") for m in with_plugin["modules"]), with_plugin["modules"]


def test_a_plain_torch_session_is_the_session_without_the_plugin(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "XLA_FLAGS", "PJRT_DEVICE", "GRPC_VERBOSITY",
                 "PJRT_DYNAMIC_PLUGINS", "TF_CPP_MIN_LOG_LEVEL", "PJRT_NPROC"):
        monkeypatch.delenv(name, raising=False)
    for name in [n for n in __import__("os").environ if n.startswith("PYTEST_XLA_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PROBE_DIR", str(pytester.path / "probes"))
    pytester.makepyfile(test_probe=PROBE)

    with_plugin = _probe(pytester, monkeypatch, "plugin", "-p", "no:xdist")
    without = _probe(pytester, monkeypatch, "no-plugin", "-p", "no:xdist", "-p", "no:xla_dynamo")
    _same_process(with_plugin, without)
    for name in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "XLA_FLAGS", "PJRT_DEVICE", "GRPC_VERBOSITY"):
        assert name not in with_plugin["env"]
    assert with_plugin["modules"] == DORMANT_MODULES  # no session, no zoo, no devices: nothing but the options
    assert without["modules"] == []
    assert with_plugin["plugin_lines"] == without["plugin_lines"] == []  # not one line of the plugin's

    # xdist: the workers are the same processes with the plugin as without it (the controller activates the
    # plugin, so that workers report to it, but sets nothing and starts nothing)
    with_plugin = _probe(pytester, monkeypatch, "plugin-xdist", "-n", "1")
    without = _probe(pytester, monkeypatch, "no-plugin-xdist", "-n", "1", "-p", "no:xla_dynamo")
    _same_process(with_plugin, without)
    for name in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "XLA_FLAGS", "PJRT_DEVICE"):
        assert name not in with_plugin["env"]


XLA_AND_PLAIN = """
import os
import sys

import pytest


@pytest.mark.xla
def test_xla():
    assert os.environ["PJRT_DEVICE"] == "CPU"
    assert "torch_xla" in sys.modules  # the runtime came up before the test


def test_plain():
    assert "torch_xla" not in sys.modules or os.environ["PJRT_DEVICE"] == "CPU"
"""


def test_the_plugin_turns_on_at_the_first_test_that_uses_it(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PJRT_DEVICE", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "XLA_FLAGS"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_mixed=XLA_AND_PLAIN)
    # the XLA test deselected: the plugin's test was collected, but nothing of it runs: no line, no effect
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-k", "plain")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert not [line for line in result.stdout.lines if line.startswith("xla-dynamo")], result.stdout.str()
    # selected: the runtime, the default device and the header lines, after collection
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["collected 2 items", "xla-dynamo: backends=trace_once *PJRT_DEVICE=CPU *",
                                 "xla-dynamo known issues: * entries, *", "*2 passed*"])


def test_where_the_plugin_turns_on(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in __import__("os").environ if n.startswith("PYTEST_XLA_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv(activation.CHILD_ENV, raising=False)
    assert activation.eager_reason(pytester.parseconfig("-p", "no:xdist")) is None
    assert activation.eager_reason(pytester.parseconfig("-p", "no:xdist", "--xla-seed=3")) == "--xla-seed is set"
    monkeypatch.setenv("PYTEST_XLA_TIER", "full")
    assert activation.eager_reason(pytester.parseconfig("-p", "no:xdist")) == "--xla-tier is set"
    monkeypatch.delenv("PYTEST_XLA_TIER")
    pytester.makeini("[pytest]\nxla_report = csv\n")  # tox.ini
    assert activation.eager_reason(pytester.parseconfig("-p", "no:xdist")) == "--xla-report is set"
    assert activation.eager_reason(pytester.parseconfig("-n", "2")) == "pytest-xdist (-n/--dist)"
    assert activation.eager_reason(pytester.parseconfig("-p", "no:xdist"),
                                   environ={activation.CHILD_ENV: "x.jsonl"}) == "an isolated test's child"
    (pytester.path / "tox.ini").unlink()
    pytester.makeconftest("def pytest_xla_register_models(register):\n    pass\n")
    assert activation.eager_reason(pytester.parseconfig("-p", "no:xdist")) == (
        "pytest_xla_register_models is implemented")


def test_what_makes_a_test_use_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_uses="""
        import pytest

        def test_plain(tmp_path): pass
        def test_subprocess(xla_subprocess): pass
        def test_device(xla_device): pass
        @pytest.mark.xla_seed(3)
        def test_marked(): pass
        @pytest.mark.xla
        def test_xla(): pass
        @pytest.mark.slow
        def test_other_marker(): pass
    """)
    items, _ = pytester.inline_genitems("-p", "no:xdist", "-W", "ignore::pytest.PytestUnknownMarkWarning")
    uses = {item.name: (activation.uses_plugin(item), activation.needs_xla(item)) for item in items}
    assert uses == {"test_plain": (False, False), "test_subprocess": (True, False), "test_device": (True, True),
                    "test_marked": (True, False), "test_xla": (True, True), "test_other_marker": (False, False)}


def test_the_markers_are_declared_once() -> None:
    assert markers.MARKERS is activation.MARKERS
    assert activation.PLUGIN_MARKERS == {line.split(":")[0].split("(")[0] for line in markers.MARKERS} - {"xdist_group"}
    assert activation.XLA_FIXTURES < activation.PLUGIN_FIXTURES


def test_importing_the_plugin_imports_neither_torch_nor_its_parts(pytester: pytest.Pytester) -> None:
    code = ("import sys, pytest_xla_dynamo.plugin; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pytest_xla_dynamo')))")
    result = pytester.run(__import__("sys").executable, "-c", code)
    assert result.ret == 0, result.stderr.str()
    assert result.stdout.lines[-1] == repr(DORMANT_MODULES)



"""When the plugin turns on: a session that does not use it is the session it would be without it.

Installed in a venv, the plugin is loaded by every pytest session there. It stays *dormant* (its options
and markers declared, nothing else: no session object, no concern plugins, no header line, no
environment variable, no torch) until the session shows that it uses the plugin, and only then
*activates* (``plugin.py``: the session object and the concern plugins):

* at configure (:func:`eager_reason`) when a plugin option is set (command line, environment, ini), a
  hook of the plugin is implemented (a ``conftest.py`` registering models, backends, patches or known
  issues), the session was started by ``python -m pytest_xla_dynamo``, is an isolated test's child, or
  runs under pytest-xdist (controller and workers alike, so that every worker reports to the
  controller);
* otherwise during collection, at the first test that uses the plugin (:func:`uses_plugin`: one of its
  fixtures or markers), before any collection hook of the concern plugins runs; their header lines are
  then shown after collection;
* or, failing both, when something asks for the session object (``session.get_session``: a test that
  records through it), from then on.

An active session is not yet an XLA session: the process-wide effects (``PJRT_DEVICE``, the CPU
instruction-set cap, the structured-trace filter, the XLA runtime) start only once collection has
selected a test that needs XLA (:func:`needs_xla`), in each process that runs it (an xdist worker, an
isolated child), before any test runs. No torch here, and nothing heavy: this module is imported by
every pytest session of the venv.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import pytest

#: the marker declarations (``pytest --markers``; ``--strict-markers`` accepts them)
MARKERS = (
    "xla: the test needs torch and torch_xla (skipped with a reason where they are missing)",
    "xla_backend(*names): backends for the xla_backend fixture of this test (overrides --xla-backend)",
    "xla_mode(mode): the test's mode, 'train' or 'infer': backends that do not support it are not "
    "parametrized",
    "xla_models(*names): models for the xla_model fixture of this test (overrides --xla-models)",
    "xla_tensor_mode(*modes): tensor modes for the tensor_mode fixture (overrides --xla-tensor-mode)",
    "xla_patch(*names): op patches active during this test (adds to --xla-patch)",
    "xla_tolerance(atol=None, rtol=None, tol=None): parity tolerance for this test",
    "xla_seed(seed): seed for this test (overrides --xla-seed)",
    "xla_known_issue(id, **entry): this test reproduces a known issue (strict xfail where affected)",
    "xla_isolated(timeout=None): run this test in a fresh interpreter (a crash is reported, not fatal); "
    "timeout: seconds before the child is ended (overrides xla_isolate_timeout)",
    "xla_shared_case: the test reuses the plugin's prepared (compiled) models: dynamo is not reset",
    "xdist_group(name): pytest-xdist's group (the plugin groups each model's tests on one worker)",
)
#: the plugin's own markers (``xdist_group`` is pytest-xdist's)
PLUGIN_MARKERS = frozenset(line.split(":")[0].split("(")[0] for line in MARKERS if line.startswith("xla"))

# Fixtures whose use makes a test an XLA test (skipped without torch_xla, isolated per test).
XLA_FIXTURES = frozenset({"xla_device", "xla_backend", "tensor_mode", "xla_parity", "xla_graphs", "xla_timing",
                          "xla_model"})
#: every fixture the plugin defines (using one activates the plugin; only XLA_FIXTURES make an XLA test)
PLUGIN_FIXTURES = XLA_FIXTURES | {"xla_config_obj", "xla_patches", "xla_snapshot", "xla_subprocess", "xla_op",
                                   "xla_direction", "xla_ops"}
#: what a test function must use for ``pytest_generate_tests`` to parametrize it
PARAMETRIZED_FIXTURES = frozenset({"xla_model", "xla_backend", "tensor_mode", "xla_op"})
#: the op suite's fixture: its cases run in the op server's process (torch_xla there, not in pytest's)
OP_FIXTURE = "xla_op"
#: the hooks a project implements to extend the plugin (implementing one activates it at configure)
EXTENSION_HOOKS = ("pytest_xla_register_backends", "pytest_xla_register_models", "pytest_xla_register_patches",
                   "pytest_xla_known_issues")
#: the environment variable that makes a session an isolated test's child (session.CHILD_ENV)
CHILD_ENV = "PYTEST_XLA_ISOLATED_CHILD"
#: set in ``config.stash`` once the plugin is active in this process
ACTIVE_KEY = pytest.StashKey[bool]()
#: set by a dormant plugin: turns it on and returns the session object (``session.get_session`` calls it, so that
#: code that reaches for the session, a test recording through it, turns the plugin on too)
ACTIVATE_KEY = pytest.StashKey[Callable[[], Any]]()


def register_markers(config: pytest.Config) -> None:
    """Declare :data:`MARKERS` (``pytest --markers``; ``--strict-markers`` accepts them)."""
    for line in MARKERS:
        config.addinivalue_line("markers", line)


def needs_xla(item: pytest.Item) -> bool:
    """Whether ``item`` needs torch and torch_xla in this process: the ``xla`` marker or one of :data:`XLA_FIXTURES`
    (an op case does not: it runs in the op server, :func:`runs_ops`)."""
    if runs_ops(item):
        return False
    return item.get_closest_marker("xla") is not None or bool(
        XLA_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def runs_ops(item: pytest.Item) -> bool:
    """Whether ``item`` is an op case (:data:`OP_FIXTURE`): it needs XLA in the op server, not in this process."""
    return OP_FIXTURE in getattr(item, "fixturenames", ())


def uses_plugin(item: pytest.Item) -> bool:
    """Whether ``item`` uses the plugin: one of its fixtures or markers."""
    if PLUGIN_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    return any(mark.name in PLUGIN_MARKERS for mark in item.iter_markers())


def uses_parametrized_fixtures(fixturenames: Iterable[str]) -> bool:
    return bool(PARAMETRIZED_FIXTURES.intersection(fixturenames))


def explicit_options(config: pytest.Config) -> list[str]:
    """The plugin options this session sets (command line, environment, ini), as flags."""
    from pytest_xla_dynamo.options import declared, raw_value

    return [opt.shown for opt in declared() if raw_value(config, opt)[1] != "default"]


def eager_reason(config: pytest.Config, environ: dict[str, str] | None = None) -> str | None:
    """Why the plugin activates at configure (see the module docstring); None: it stays dormant until a
    collected test uses it."""
    env = os.environ if environ is None else environ
    if env.get(CHILD_ENV):
        return "an isolated test's child"
    if hasattr(config, "workerinput"):
        return "a pytest-xdist worker"
    if getattr(config.option, "numprocesses", None) or getattr(config.option, "dist", "no") != "no":
        return "pytest-xdist (-n/--dist)"
    if any(getattr(p, "xla_dynamo_main", False) is True for p in config.pluginmanager.get_plugins()):
        return "python -m pytest_xla_dynamo"
    hooks = [name for name in EXTENSION_HOOKS if getattr(config.hook, name).get_hookimpls()]
    if hooks:
        return f"{hooks[0]} is implemented"
    given = explicit_options(config)
    if given:
        return f"{given[0]} is set"
    return None

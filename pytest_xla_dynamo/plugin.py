"""pytest-xla-dynamo: the wiring (entry point ``xla_dynamo``; ``-p no:xla_dynamo`` turns it off).

This module only connects pytest to the plugin's parts: it resolves the options into the session
object (:class:`~pytest_xla_dynamo.session.XlaSession`), registers it and the concern plugins (known
issues, triage, isolation, sharding, reports, gating), delegates collection to :mod:`~pytest_xla_dynamo.collection`,
and defines the fixtures. It imports no torch: fixtures and hooks that need torch import it when they run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo import backends as _backends
from pytest_xla_dynamo import collection, devices, hookspecs, markers, options, patches, zoo
from pytest_xla_dynamo import config as _config
from pytest_xla_dynamo.cpu_isa import CPU_ISAS
from pytest_xla_dynamo.session import XdistHooks, XlaSession, get_session, session_key

if TYPE_CHECKING:
    from pytest_xla_dynamo.backends import Backend
    from pytest_xla_dynamo.graphs.check import GraphCheck
    from pytest_xla_dynamo.parity import XlaParity
    from pytest_xla_dynamo.snippets import Snippets
    from pytest_xla_dynamo.tensor_modes import TensorMode
    from pytest_xla_dynamo.timing.check import XlaTiming


# --- options and configuration ---------------------------------------------------------------------


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    registry = _backends.default_registry()
    options.add_options(parser, {"backends": ", ".join(registry.names()),
                                 "patches": ", ".join(patches.patch_names()),
                                 "collections": ", ".join(zoo.collection_names()),
                                 "cpu_isas": ", ".join(CPU_ISAS)})


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    devices.default_pjrt_device()
    devices.quiet_torch_trace()
    markers.register(config)
    registry = _backends.default_registry()
    config.hook.pytest_xla_register_backends(registry=registry)
    config.hook.pytest_xla_register_models(register=zoo.register_model)
    config.hook.pytest_xla_register_patches(register=patches.register_patch)
    xcfg = _config.resolve(config, backends=registry.names(), backend_aliases=registry.aliases,
                           models=zoo.model_names(), patches=patches.patch_names(),
                           collections={c: zoo.models_in([c]) for c in zoo.collection_names()})
    from pytest_xla_dynamo.report import check_report_dir

    problem = check_report_dir(xcfg)
    if problem:
        raise pytest.UsageError(problem)
    for alias in set(_config.split_list(options.raw_value(config, options.OPTIONS_BY_DEST["xla_backend"])[0])):
        if alias in registry.aliases:
            config.issue_config_time_warning(pytest.PytestConfigWarning(_backends.SEED_ALIAS_NOTE.format(
                alias=alias, name=registry.aliases[alias])), stacklevel=2)
    session = XlaSession(config, xcfg, registry)
    config.stash[session_key] = session
    manager = config.pluginmanager
    manager.register(session, "xla_dynamo_session")
    if manager.hasplugin("xdist"):
        manager.register(XdistHooks(session), "xla_dynamo_xdist")
    _use_loadgroup(config)
    from pytest_xla_dynamo.cpu_isa import CpuIsaPlugin
    from pytest_xla_dynamo.gating.plugin import GatingPlugin
    from pytest_xla_dynamo.isolation import IsolationPlugin
    from pytest_xla_dynamo.known_issues.plugin import KnownIssuesPlugin
    from pytest_xla_dynamo.report.plugin import ReportPlugin
    from pytest_xla_dynamo.sharding import ShardingPlugin
    from pytest_xla_dynamo.timing.threads import ThreadBudgetPlugin
    from pytest_xla_dynamo.triage.plugin import TriagePlugin

    # the concern plugins, each given the session (none of them imports torch); triage after known
    # issues, so that its report wrapper sees the judged report
    for name, factory in (("cpu_isa", CpuIsaPlugin), ("threads", ThreadBudgetPlugin),
                          ("known_issues", KnownIssuesPlugin), ("triage", TriagePlugin),
                          ("isolation", IsolationPlugin), ("sharding", ShardingPlugin),
                          ("report", ReportPlugin), ("gating", GatingPlugin)):
        manager.register(factory(session), f"xla_dynamo_{name}")


def _use_loadgroup(config: pytest.Config) -> None:
    """Keep each model's tests on one worker: ``-n N`` without ``--dist`` schedules by xdist_group."""
    if getattr(config.option, "dist", "no") == "load" and not any(
            a == "--dist" or a.startswith("--dist=") or a == "-d" for a in config.invocation_params.args):
        config.option.dist = "loadgroup"


def pytest_report_header(config: pytest.Config) -> list[str]:
    from pytest_xla_dynamo.versions import installed_versions

    xcfg = get_session(config).xcfg
    versions = "; ".join(f"{d} {v or 'not installed'}" for d, v in installed_versions().items())
    return [f"xla-dynamo: backends={','.join(xcfg.backends)} tier={xcfg.tier} seed={xcfg.seed} "
            f"PJRT_DEVICE={os.environ.get('PJRT_DEVICE', '')} ({versions})"]


# --- collection ---------------------------------------------------------------------------------------


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    collection.parametrize(get_session(metafunc.config), metafunc)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    xsession = get_session(config)
    registry = xsession.backends
    errors: list[str] = []
    for item in items:
        errors += markers.validate_item(item, backends=registry.names(), backend_aliases=registry.aliases)
    if errors:
        raise pytest.UsageError("\n".join(dict.fromkeys(errors)))
    collection.arrange(xsession, items)


# --- the runtime and per-test state -------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Bring the XLA runtime up before the first test that may run torch (pytorch/xla#4174: a CPU
    backward before the runtime is up breaks every later XLA backward), where torch_xla is installed.

    "May run torch": torch is already imported (by a test module, a conftest or a fixture) or the test
    uses the plugin's XLA fixtures. A session that never imports torch never pays for the runtime.
    A bring-up that failed once is not retried: later XLA tests skip with its reason.
    """
    reason = devices.bringup_failure()
    if reason is not None and collection.needs_xla(item):
        pytest.skip(reason)
    if (devices.xla_available() and not devices.runtime_up() and item.get_closest_marker("skip") is None
            and ("torch" in sys.modules or collection.needs_xla(item))):
        devices.ensure_runtime()


@pytest.fixture(autouse=True)
def _xla_isolation(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each XLA test starts from a known state and leaves global state as it found it."""
    item = request.node
    if not isinstance(item, pytest.Item) or not collection.needs_xla(item) or not devices.xla_available():
        yield
        return
    from pytest_xla_dynamo import state

    seed = markers.marker_seed(item, get_session(request.config).xcfg.seed)
    with state.clean_state(seed, reset_dynamo=item.get_closest_marker("xla_shared_case") is None):
        yield


@pytest.fixture(autouse=True)
def _xla_active_patches(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """Patches from ``--xla-patch`` / ``REPLACE_MAXPOOL`` and ``@pytest.mark.xla_patch``, undone after
    (a test that asks for patches skips where torch is missing; other tests are left alone)."""
    with patches.for_test(_item(request), get_session(request.config).xcfg.patches) as active:
        yield active


# --- fixtures --------------------------------------------------------------------------------------


def _skip_without(*extra: str) -> None:
    reason = devices.skip_reason(extra)
    if reason:
        pytest.skip(reason)


def _item(request: pytest.FixtureRequest) -> pytest.Item:
    node = request.node
    assert isinstance(node, pytest.Item)
    return node


@pytest.fixture(scope="session")
def xla_config_obj(request: pytest.FixtureRequest) -> _config.XlaConfig:
    """The session's resolved options (:class:`pytest_xla_dynamo.config.XlaConfig`)."""
    return get_session(request.config).xcfg


@pytest.fixture(scope="session")
def xla_device() -> Any:
    """This process's XLA device (``torch_xla.device()``); each xdist worker has its own."""
    _skip_without()
    return devices.ensure_runtime()


@pytest.fixture
def xla_backend(request: pytest.FixtureRequest) -> Backend:
    """The backend under test, parametrized from ``--xla-backend`` (ids: the backend name)."""
    session = get_session(request.config)
    return session.backends.get(getattr(request, "param", None) or session.xcfg.backends[0])


@pytest.fixture
def tensor_mode(request: pytest.FixtureRequest) -> TensorMode:
    """The tensor mode, parametrized from ``--xla-tensor-mode`` (``eager`` or ``fake``)."""
    from pytest_xla_dynamo.tensor_modes import get_tensor_mode

    return get_tensor_mode(getattr(request, "param", None) or get_session(request.config).xcfg.tensor_modes[0])


@pytest.fixture
def xla_model(request: pytest.FixtureRequest) -> zoo.ModelSpec:
    """The model spec under test, parametrized from ``--xla-models`` (ids: the model name)."""
    spec = zoo.get_model(request.param)
    missing = spec.missing_requirements()
    if missing:
        pytest.skip(f"model {spec.name} needs {', '.join(missing)}: pip install {' '.join(missing)}")
    return spec


@pytest.fixture
def xla_patches(_xla_active_patches: list[str]) -> Iterator[patches.PatchController]:
    """Patch control for a test: ``xla_patches.apply("maxpool_to_avgpool", model=m)`` as a context
    manager, ``xla_patches.patch_model(m)`` to apply the active patches to a model built earlier."""
    controller = patches.PatchController(_xla_active_patches)
    yield controller
    controller.close()


@pytest.fixture
def xla_parity(request: pytest.FixtureRequest) -> XlaParity:
    """Parity against eager: ``xla_parity.check_case(spec, backend)`` for zoo cases (mode from the
    ``xla_mode`` marker), ``xla_parity.training(model_factory, inputs)`` / ``.inference(...)`` for yours."""
    _skip_without()
    from pytest_xla_dynamo.parity import XlaParity

    item = _item(request)
    return XlaParity(get_session(request.config), item, lambda: request.getfixturevalue("xla_backend"),
                     markers.marker_tolerance(item))


@pytest.fixture
def xla_snapshot(request: pytest.FixtureRequest) -> Any:
    """syrupy's ``snapshot`` with the graph-signature extension (sorted JSON under ``snapshots/``)."""
    _skip_without("syrupy")
    from pytest_xla_dynamo.graphs.snapshots import GraphSnapshotExtension

    return request.getfixturevalue("snapshot").use_extension(GraphSnapshotExtension)


@pytest.fixture
def xla_graphs(request: pytest.FixtureRequest, xla_snapshot: Any) -> GraphCheck:
    """Graph conformance: ``xla_graphs.check_case(spec, backend)`` checks a zoo case's graph signature
    against its snapshot (mode from the ``xla_mode`` marker)."""
    from pytest_xla_dynamo.graphs.check import GraphCheck

    return GraphCheck(get_session(request.config), _item(request), xla_snapshot)


@pytest.fixture
def xla_timing(request: pytest.FixtureRequest) -> XlaTiming:
    """Timing against the baseline: ``xla_timing.check_case(spec, backend)`` (mode from the ``xla_mode``
    marker), through pytest-benchmark's ``benchmark`` fixture where it is installed."""
    _skip_without()
    from pytest_xla_dynamo.timing.check import XlaTiming

    benchmark = request.getfixturevalue("benchmark") if "benchmark" in request.fixturenames else None
    return XlaTiming(get_session(request.config), _item(request), benchmark)


@pytest.fixture
def xla_subprocess(request: pytest.FixtureRequest) -> Snippets:
    """Runs a snippet in a fresh interpreter: ``xla_subprocess.run(code)``, ``.check(code)``."""
    from pytest_xla_dynamo.snippets import Snippets

    return Snippets(cwd=request.config.invocation_params.dir)

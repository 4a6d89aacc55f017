"""pytest-xla-dynamo: the wiring (entry point ``xla_dynamo``; ``-p no:xla_dynamo`` turns it off).

This module only connects pytest to the plugin's parts: it resolves the options into the session
object (:class:`~pytest_xla_dynamo.session.XlaSession`), registers it and the concern plugins (known
issues, triage, isolation, sharding, reports, gating), delegates collection to :mod:`~pytest_xla_dynamo.collection`,
and defines the fixtures. It imports no torch: fixtures and hooks that need torch import it when they run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo import activation, hookspecs, options
from pytest_xla_dynamo.timing.options import add_timing_options

if TYPE_CHECKING:
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.config import XlaConfig
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.core.patches import PatchController
    from pytest_xla_dynamo.core.tensor_modes import TensorMode
    from pytest_xla_dynamo.graphs.check import GraphCheck
    from pytest_xla_dynamo.parity import XlaParity
    from pytest_xla_dynamo.session import XlaSession
    from pytest_xla_dynamo.timing.check import XlaTiming
    from pytest_xla_dynamo.workers.snippets import Snippets

#: the option help's lists of valid values until ``--help`` asks for them (computing them imports the zoo
#: and scans the installed packages' entry points: too much for every pytest session of the venv)
LISTED_BY_HELP = "(listed by pytest --help)"
HELP_VALUES = ("backends", "patches", "collections", "cpu_isas")
#: the concern plugins, registered as ``xla_dynamo_<name>`` in this order (triage after known issues, so that
#: its report wrapper sees the judged report); a late activation shows their header lines in this order too
CONCERNS = ("cpu_isa", "timing", "known_issues", "triage", "isolation", "sharding", "report", "gating", "ops")


# --- options and configuration ---------------------------------------------------------------------


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    placeholders = dict.fromkeys(HELP_VALUES, LISTED_BY_HELP)
    options.add_options(parser, placeholders)
    add_timing_options(parser, placeholders)


def _help_values() -> dict[str, str]:
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.config import CPU_ISAS
    from pytest_xla_dynamo.core import backends, patches

    return {"backends": ", ".join(backends.default_registry().names()),
            "patches": ", ".join(patches.patch_names()), "collections": ", ".join(zoo.collection_names()),
            "cpu_isas": ", ".join(CPU_ISAS)}


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``--help``: the options' lists of valid values, filled in now (see :data:`LISTED_BY_HELP`)."""
    if config.option.help:
        options.fill_help(config, _help_values())


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    activation.register_markers(config)  # declared by a dormant plugin too (markers.py validates them when active)
    if activation.eager_reason(config) is not None:
        _activate(config)
    else:
        def activate() -> XlaSession:
            return _activate(config, late=True)

        config.stash[activation.ACTIVATE_KEY] = activate


def pytest_unconfigure(config: pytest.Config) -> None:
    """A dormant plugin's snippets (``pytest_xla_dynamo.workers.snippets`` used directly) end with the session, as an
    active plugin's do (its isolation plugin ends them)."""
    processes = sys.modules.get("pytest_xla_dynamo.workers.processes")
    if processes is not None and not _active(config):
        processes.end_all()


def _activate(config: pytest.Config, *, late: bool = False) -> XlaSession:
    """Turn the plugin on (see :mod:`~pytest_xla_dynamo.activation`): resolve the options into the session
    object and register it and the concern plugins. Sets no environment variable and imports no torch."""
    from pytest_xla_dynamo import config as _config
    from pytest_xla_dynamo import zoo
    from pytest_xla_dynamo.core import backends as _backends
    from pytest_xla_dynamo.core import patches
    from pytest_xla_dynamo.session import XlaSession, session_key
    from pytest_xla_dynamo.workers.xdist_hooks import XdistHooks

    registry = _backends.default_registry()
    for hook, found in ((config.hook.pytest_xla_register_backends, registry),
                        (config.hook.pytest_xla_register_models, zoo.MODELS),
                        (config.hook.pytest_xla_register_patches, patches.PATCHES)):
        hook(registry=found, register=found.register)  # one form for the three kinds (hookspecs.py)
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
    config.stash[activation.ACTIVE_KEY] = True
    session.activated_late = late
    manager = config.pluginmanager
    manager.register(session, "xla_dynamo_session")
    if manager.hasplugin("xdist"):
        manager.register(XdistHooks(session), "xla_dynamo_xdist")
    _share_the_machine(session)
    _use_loadgroup(config)
    from pytest_xla_dynamo.gating.plugin import GatingPlugin
    from pytest_xla_dynamo.known_issues.plugin import KnownIssuesPlugin
    from pytest_xla_dynamo.ops.plugin import OpsPlugin
    from pytest_xla_dynamo.report.plugin import ReportPlugin
    from pytest_xla_dynamo.timing.plugin import TimingPlugin
    from pytest_xla_dynamo.triage.plugin import TriagePlugin
    from pytest_xla_dynamo.workers.cpu_isa import CpuIsaPlugin
    from pytest_xla_dynamo.workers.isolation import IsolationPlugin
    from pytest_xla_dynamo.workers.sharding import ShardingPlugin

    # the concern plugins, each given the session (none of them imports torch), in the order of CONCERNS
    factories: dict[str, Callable[[XlaSession], object]] = {
        "cpu_isa": CpuIsaPlugin, "timing": TimingPlugin, "known_issues": KnownIssuesPlugin,
        "triage": TriagePlugin, "isolation": IsolationPlugin, "sharding": ShardingPlugin, "report": ReportPlugin,
        "gating": GatingPlugin, "ops": OpsPlugin}
    for name in CONCERNS:
        manager.register(factories[name](session), f"xla_dynamo_{name}")
    return session


def _share_the_machine(session: XlaSession) -> None:
    """In an xdist worker given the machine lock's folder: hold it for each test, take the worker's share of
    the cores for torch (:mod:`~pytest_xla_dynamo.workers.machine_lock`)."""
    from pytest_xla_dynamo.core.machine import available_cores
    from pytest_xla_dynamo.workers import machine_lock
    from pytest_xla_dynamo.workers.xdist_hooks import SHARED_FOLDER_KEY

    folder = getattr(session.config, "workerinput", {}).get(SHARED_FOLDER_KEY)
    if not folder or session.worker_count < 2 or not machine_lock.available():
        return
    lock = machine_lock.MachineLock(folder)
    threads = machine_lock.worker_threads(available_cores(), session.worker_count)
    session.config.pluginmanager.register(machine_lock.MachineLockPlugin(lock, threads), machine_lock.PLUGIN_NAME)


def _active(config: pytest.Config) -> bool:
    return config.stash.get(activation.ACTIVE_KEY, False)


def get_session(config: pytest.Config) -> XlaSession:
    from pytest_xla_dynamo.session import get_session as _get_session

    return _get_session(config)


def _use_loadgroup(config: pytest.Config) -> None:
    """Keep each model's tests on one worker: ``-n N`` without ``--dist`` schedules by xdist_group. A worker
    learns it from the controller (``workerinput``): it parses the command line again, without the change."""
    from pytest_xla_dynamo.workers.xdist_hooks import LOADGROUP_KEY

    workerinput = getattr(config, "workerinput", None)
    if isinstance(workerinput, dict):
        if workerinput.get(LOADGROUP_KEY):
            config.option.loadgroup = True  # xdist's worker adds the group to each test id (remote.py)
        return
    if getattr(config.option, "dist", "no") == "load" and not any(
            a == "--dist" or a.startswith("--dist=") or a == "-d" for a in config.invocation_params.args):
        config.option.dist = "loadgroup"


def _header_line(config: pytest.Config) -> str:
    from pytest_xla_dynamo.versions import installed_versions

    xcfg = get_session(config).xcfg
    versions = "; ".join(f"{d} {v or 'not installed'}" for d, v in installed_versions().items())
    device = os.environ.get("PJRT_DEVICE") or "CPU (the default)"
    return (f"xla-dynamo: backends={','.join(xcfg.backends)} tier={xcfg.tier} seed={xcfg.seed} "
            f"PJRT_DEVICE={device} ({versions})")


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [_header_line(config)] if _active(config) else []  # a dormant plugin says nothing


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    """A plugin activated during collection, where the session runs XLA tests: the header lines it and its
    concern plugins would have shown."""
    if not (_active(config) and get_session(config).activated_late and get_session(config).runs_xla):
        return []  # nothing of the plugin was selected: nothing to say
    lines = [_header_line(config)]
    for name in CONCERNS:
        plugin = config.pluginmanager.get_plugin(f"xla_dynamo_{name}")
        header = getattr(plugin, "pytest_report_header", None)
        found = header(config=config) if header is not None else None
        lines += [found] if isinstance(found, str) else list(found or [])
    return lines


# --- collection ---------------------------------------------------------------------------------------


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not activation.uses_parametrized_fixtures(metafunc.fixturenames):
        return
    if not _active(metafunc.config):
        _activate(metafunc.config, late=True)
    from pytest_xla_dynamo import collection

    collection.parametrize(get_session(metafunc.config), metafunc)


def pytest_itemcollected(item: pytest.Item) -> None:
    """A dormant plugin activates at the first collected test that uses it (before any collection hook of
    the concern plugins runs)."""
    if not _active(item.config) and activation.uses_plugin(item):
        _activate(item.config, late=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if not _active(config):
        return
    from pytest_xla_dynamo import collection, markers

    xsession = get_session(config)
    registry = xsession.backends
    errors: list[str] = []
    for item in items:
        errors += markers.validate_item(item, backends=registry.names(), backend_aliases=registry.aliases)
    if errors:
        raise pytest.UsageError("\n".join(dict.fromkeys(errors)))
    collection.arrange(xsession, items)
    from pytest_xla_dynamo.timing.benchmark import name_benchmark

    name_benchmark(items)  # before pytest-benchmark's own hook reads the names (trylast)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Where the session's selected tests need XLA, the process-wide effects start here, before any test
    runs (and never during collection): ``PJRT_DEVICE`` defaults to ``CPU``, torch's structured-trace
    records stay out of captured logs, and the CPU instruction-set cap is set (see
    :mod:`~pytest_xla_dynamo.workers.cpu_isa`; here, tryfirst, so that the line after collection says it). A session
    without XLA tests is left as it is."""
    if not _active(session.config):
        return
    xsession = get_session(session.config)
    # a test skipped unconditionally (where torch_xla is missing, every XLA test is) runs nothing
    xsession.runs_xla = any((activation.needs_xla(item) or activation.runs_ops(item))
                            and item.get_closest_marker("skip") is None for item in session.items)
    if xsession.runs_xla:
        from pytest_xla_dynamo.core import devices

        devices.default_pjrt_device()
        devices.quiet_torch_trace()
        cpu_isa = session.config.pluginmanager.get_plugin("xla_dynamo_cpu_isa")
        if cpu_isa is not None:
            cpu_isa.apply()
        from pytest_xla_dynamo import collection

        # after the cap: sizing the models runs torch, which chooses its CPU kernels once (found by the main job:
        # "torch already chose avx512 kernels in this process" when the order was set in modifyitems)
        collection.order_by_model(session.items, xsession.xcfg.tier)


# --- the runtime and per-test state -------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Bring the XLA runtime up before the first test that may run torch (pytorch/xla#4174: a CPU
    backward before the runtime is up breaks every later XLA backward), where torch_xla is installed,
    in a session that runs XLA tests.

    "May run torch": torch is already imported (by a test module, a conftest or a fixture) or the test
    uses the plugin's XLA fixtures. A session without XLA tests, or that never imports torch, never pays
    for the runtime. A bring-up that failed once is not retried: later XLA tests skip with its reason.
    """
    if not _active(item.config) or not get_session(item.config).runs_xla:
        return
    from pytest_xla_dynamo.core import devices

    reason = devices.bringup_failure()
    if reason is not None and activation.needs_xla(item):
        pytest.skip(reason)
    if (devices.xla_available() and not devices.runtime_up() and item.get_closest_marker("skip") is None
            and ("torch" in sys.modules or activation.needs_xla(item))):
        devices.ensure_runtime()


@pytest.fixture(autouse=True)
def _xla_isolation(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each XLA test starts from a known state and leaves global state as it found it."""
    item = request.node
    if not isinstance(item, pytest.Item) or not activation.needs_xla(item):
        yield
        return
    from pytest_xla_dynamo import markers
    from pytest_xla_dynamo.core import devices

    if not devices.xla_available():
        yield
        return
    from pytest_xla_dynamo.core import state

    seed = markers.marker_seed(item, get_session(request.config).xcfg.seed)
    with state.clean_state(seed, reset_dynamo=item.get_closest_marker("xla_shared_case") is None):
        yield


@pytest.fixture(autouse=True)
def _xla_active_patches(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """Patches from ``--xla-patch`` / ``REPLACE_MAXPOOL`` and ``@pytest.mark.xla_patch``, undone after
    (a test that asks for patches skips where torch is missing; other tests are left alone). A dormant
    plugin has none."""
    if not _active(request.config):
        yield []
        return
    from pytest_xla_dynamo import markers

    with markers.for_test(_item(request), get_session(request.config).xcfg.patches) as active:
        yield active


# --- fixtures --------------------------------------------------------------------------------------


def _skip_without(*extra: str) -> None:
    from pytest_xla_dynamo.core import devices

    reason = devices.skip_reason(extra)
    if reason:
        pytest.skip(reason)


def _item(request: pytest.FixtureRequest) -> pytest.Item:
    node = request.node
    assert isinstance(node, pytest.Item)
    return node


@pytest.fixture(scope="session")
def xla_config_obj(request: pytest.FixtureRequest) -> XlaConfig:
    """The session's resolved options (:class:`pytest_xla_dynamo.config.XlaConfig`)."""
    return get_session(request.config).xcfg


@pytest.fixture(scope="session")
def xla_device() -> Any:
    """This process's XLA device (``torch_xla.device()``); each xdist worker has its own."""
    _skip_without()
    from pytest_xla_dynamo.core import devices

    return devices.ensure_runtime()


@pytest.fixture
def xla_backend(request: pytest.FixtureRequest) -> Backend:
    """The backend under test, parametrized from ``--xla-backend`` (ids: the backend name)."""
    session = get_session(request.config)
    return session.backends.get(getattr(request, "param", None) or session.xcfg.backends[0])


@pytest.fixture
def tensor_mode(request: pytest.FixtureRequest) -> TensorMode:
    """The tensor mode, parametrized from ``--xla-tensor-mode`` (``eager`` or ``fake``)."""
    from pytest_xla_dynamo.core.tensor_modes import get_tensor_mode

    return get_tensor_mode(getattr(request, "param", None) or get_session(request.config).xcfg.tensor_modes[0])


@pytest.fixture
def xla_model(request: pytest.FixtureRequest) -> zoo.ModelSpec:
    """The model spec under test, parametrized from ``--xla-models`` (ids: the model name)."""
    from pytest_xla_dynamo import zoo

    spec = zoo.get_model(request.param)
    missing = spec.missing_requirements()
    if missing:
        pytest.skip(f"model {spec.name} needs {', '.join(missing)}: pip install {' '.join(missing)}")
    return spec


@pytest.fixture
def xla_patches(_xla_active_patches: list[str]) -> Iterator[PatchController]:
    """Patch control for a test: ``xla_patches.apply("maxpool_to_avgpool", model=m)`` as a context
    manager, ``xla_patches.patch_model(m)`` to apply the active patches to a model built earlier."""
    from pytest_xla_dynamo.core.patches import PatchController

    controller = PatchController(_xla_active_patches)
    yield controller
    controller.close()


@pytest.fixture
def xla_parity(request: pytest.FixtureRequest) -> XlaParity:
    """Parity against eager: ``xla_parity.check_case(spec, backend)`` for zoo cases (mode from the
    ``xla_mode`` marker), ``xla_parity.training(model_factory, inputs)`` / ``.inference(...)`` for yours."""
    _skip_without()
    from pytest_xla_dynamo import markers
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
def xla_timing(request: pytest.FixtureRequest) -> Iterator[XlaTiming]:
    """Timing against the baseline: ``xla_timing.check_case(spec, backend)`` (mode from the ``xla_mode``
    marker), through pytest-benchmark's ``benchmark`` fixture where it is installed and on (not under
    pytest-xdist, where it turns itself off: the fixture is not asked for, so it does not warn that it was not
    used). The timed cases run with the thread budget; torch's thread count is given back afterwards, so that
    what runs after a timing test computes as it would have without it (an ill-conditioned verdict depends on
    the thread count)."""
    from pytest_xla_dynamo.timing.benchmark import benchmark_wanted

    benchmark = request.getfixturevalue("benchmark") if benchmark_wanted(request.config) else None
    _skip_without()
    import torch

    from pytest_xla_dynamo.timing.check import XlaTiming
    from pytest_xla_dynamo.timing.threads import apply_torch_threads

    threads = torch.get_num_threads()
    try:
        yield XlaTiming(get_session(request.config), _item(request), benchmark)
    finally:
        apply_torch_threads(threads)


@pytest.fixture
def xla_op(request: pytest.FixtureRequest) -> str:
    """The OpInfo id under test, parametrized from ``--xla-ops`` (``nn.functional.elu``, ``max.reduction_with_dim``)."""
    return str(request.param)


@pytest.fixture
def xla_direction(request: pytest.FixtureRequest) -> str:
    """The op case's direction: ``forward`` (outputs) or ``backward`` (gradients)."""
    return str(request.param)


@pytest.fixture
def xla_ops(request: pytest.FixtureRequest) -> Any:
    """Op conformance: ``xla_ops.check(op, backend, direction)`` runs one OpInfo case in the op server (a crash
    ends only the server), records it and fails the test unless it passed."""
    _skip_without("expecttest")
    from pytest_xla_dynamo.ops.plugin import OpCheck

    plugin = request.config.pluginmanager.get_plugin("xla_dynamo_ops")
    assert plugin is not None, "the op wing is registered with the session (CONCERNS)"
    return OpCheck(get_session(request.config), _item(request), plugin)


@pytest.fixture
def xla_subprocess(request: pytest.FixtureRequest) -> Snippets:
    """Runs a snippet in a fresh interpreter: ``xla_subprocess.run(code)``, ``.check(code)``."""
    from pytest_xla_dynamo.workers.snippets import Snippets

    return Snippets(cwd=request.config.invocation_params.dir)

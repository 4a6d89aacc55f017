"""The op suite in a pytest session: ``--xla-ops`` resolved, ``test_op`` parametrized, each case run and recorded.

A test that uses the ``xla_op`` fixture is parametrized over the selected OpInfo ids, the backends of
``--xla-backend`` and the op's directions (ids ``nn.functional.elu-trace_once-backward``). Its
``xla_ops`` fixture (:class:`OpCheck`) runs the case in the process's op server (:mod:`.client`: a crash ends
only the server), records it (suite ``ops``: name the op id, mode the direction) and fails the test with the
status, the first bad sample and how to reproduce it. At the end, the coverage table: ops by backend and
direction, counted by status. No torch in pytest's process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_xla_dynamo import options
from pytest_xla_dynamo.config import did_you_mean, split_list
from pytest_xla_dynamo.ops.catalog import NONE, SMOKE_NAME, VALID, CatalogError, load_catalog
from pytest_xla_dynamo.records import PASSING, CaseRecord
from pytest_xla_dynamo.session import CaseCheck

if TYPE_CHECKING:
    from pytest_xla_dynamo.core.backends import Backend
    from pytest_xla_dynamo.ops.client import OpServer
    from pytest_xla_dynamo.session import XlaSession

SUITE = "ops"
#: seconds one op case (all its samples) may take before its server is ended and the case is a ``timeout``
CASE_TIMEOUT = 300.0
#: the parameters of an op case, parametrized together
PARAMS = ("xla_op", "xla_backend", "xla_direction")
#: the backends an op case runs on: lazy tensors, and dynamo's openxla (other backends are not parametrized)
OP_BACKENDS = ("trace_once", "trace_everytime")
#: the statuses of the coverage table, in its column order
COLUMNS = ("pass", "cpu_fallback", "pass_not_captured", "fail_accuracy", "fail_to_run", "crash", "timeout",
           "eager_fail_to_run", "pass_due_to_skip")


#: statuses of a case with no sample compared (an entry with no CPU sample of these dtypes; eager rejects all):
#: recorded, and the test skipped with the reason
NOTHING_COMPARED = ("pass_due_to_skip", "eager_fail_to_run")


class OpFailure(AssertionError):
    """An op case that did not pass: the message opens with its status (``fail_accuracy: ...``)."""


@dataclass(frozen=True)
class OpsSettings:
    """``--xla-ops`` (the ids or globs, ``smoke`` or ``all``; empty: none) and ``--xla-write-repro``."""

    ops: tuple[str, ...] = (SMOKE_NAME,)
    write_repro: Path | None = None


def resolve(config: pytest.Config) -> OpsSettings:
    """The wing's settings from its options (command line > environment > ini > default)."""
    raw, _ = options.raw_value(config, options.OPTIONS_BY_DEST["xla_ops"])
    names = tuple(split_list(raw))
    if NONE in names and len(names) > 1:
        raise pytest.UsageError(f"--xla-ops: {raw!r} mixes '{NONE}' with ops; valid: {VALID}")
    folder, _ = options.raw_value(config, options.OPTIONS_BY_DEST["xla_write_repro"])
    return OpsSettings(() if names == (NONE,) else names, Path(folder) if folder.strip() else None)


class OpsPlugin:
    """The op wing of a session: settings, parametrization, the op server, the coverage table."""

    def __init__(self, session: XlaSession) -> None:
        self.session = session
        self.settings = resolve(session.config)
        self._server: OpServer | None = None
        self.problem = ""  # what parametrization found wrong with --xla-ops: a usage error once collection ends

    @property
    def server(self) -> OpServer:
        if self._server is None:
            from pytest_xla_dynamo.ops.client import OpServer

            self._server = OpServer()
        return self._server

    def parametrize(self, metafunc: pytest.Metafunc, backends: list[str]) -> None:
        """``(xla_op, xla_backend, xla_direction)`` for every selected op, backend and direction."""
        if not self.settings.ops:
            metafunc.parametrize(PARAMS, [], indirect=True)
            return
        from pytest_xla_dynamo.core import devices

        missing = devices.skip_reason(("expecttest",))
        if missing:  # without the stack there is no op database to read: one case, skipped with the reason
            metafunc.parametrize(("xla_op", "xla_backend", "xla_direction"),
                                 [pytest.param("", "", "", marks=pytest.mark.skip(reason=missing), id="unavailable")],
                                 indirect=True)
            return
        try:
            catalog = load_catalog()
        except CatalogError as exc:
            self.problem = f"--xla-ops: {exc}"
            metafunc.parametrize(PARAMS, [], indirect=True)
            return
        chosen, unknown = catalog.select(self.settings.ops)
        if unknown:
            self.problem = (f"--xla-ops: no OpInfo entry matches {', '.join(map(repr, unknown))}"
                            f"{did_you_mean(unknown, catalog.ids)}; valid: {VALID}")
        cases = [(op, backend, direction) for op in chosen for backend in backends if backend in OP_BACKENDS
                 for direction in catalog.directions(op)]
        metafunc.parametrize(PARAMS, cases, indirect=True,
                             ids=["-".join(case) for case in cases])

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self) -> None:
        """A bad ``--xla-ops`` is a usage error (exit status 4) before any test runs (a collection hook, since
        parametrization's errors are collection errors)."""
        if self.problem:
            raise pytest.UsageError(self.problem)

    def pytest_sessionfinish(self) -> None:
        if self._server is not None:
            self._server.shutdown()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        records = self.session.store.by_suite(SUITE)
        if not self.session.reports_here or not records:
            return
        terminalreporter.section("xla ops coverage")
        for line in coverage_lines(records):
            terminalreporter.write_line(line)


def coverage_lines(records: list[CaseRecord]) -> list[str]:
    """The coverage table: one row per (backend, direction), the count of cases of each status."""
    from tabulate import tabulate

    rows: dict[tuple[str, str], dict[str, int]] = {}
    for r in records:
        counts = rows.setdefault((r.backend, r.mode), {})
        counts[r.status] = counts.get(r.status, 0) + 1
    seen = [c for c in COLUMNS if any(c in counts for counts in rows.values())]
    seen += sorted({s for counts in rows.values() for s in counts} - set(seen))
    table = [[backend, direction, len({r.name for r in records if (r.backend, r.mode) == (backend, direction)}),
              *[counts.get(c, 0) for c in seen]] for (backend, direction), counts in sorted(rows.items())]
    ops = len({r.name for r in records})
    seconds = sum(float(r.unparsed_extra.get("compile_seconds") or 0.0) for r in records)
    compiles = sum(r.compiles or 0 for r in records)
    head = f"{ops} ops, {len(records)} cases; XLA compile time {seconds:.1f} s in {compiles} compilations"
    return [head, *tabulate(table, headers=["backend", "direction", "ops", *seen], tablefmt="simple").splitlines()]


class OpCheck(CaseCheck):
    """The ``xla_ops`` fixture's object: ``check(op, backend, direction)`` runs one case, records it, and fails
    the test unless it passed."""

    suite = SUITE

    def __init__(self, session: XlaSession, item: pytest.Item, plugin: OpsPlugin) -> None:
        super().__init__(session, item)
        self.plugin = plugin

    def check(self, op: str, backend: Backend, direction: str) -> CaseRecord:
        settings = self.plugin.settings
        result = self.plugin.server.run(op, backend.name, direction, self.session.xcfg.seed, CASE_TIMEOUT,
                                        settings.write_repro)
        command = self._repro(backend)
        fallbacks = result.get("fallbacks") or {}
        from pytest_xla_dynamo.known_issues import applied_issue

        applied = applied_issue(self.item)
        record = CaseRecord(suite=self.suite, name=op, backend=backend.name, mode=direction,
                            status=str(result["status"]), message=str(result["message"]), repro=command,
                            dev=backend.device_kind, fallbacks=sum(fallbacks.values()),
                            unique_graphs=int(result.get("graphs") or 0), compiles=int(result.get("compiles") or 0),
                            unparsed_extra=figures(result),
                            known_issue=applied.entry.id if applied is not None and applied.affected else "")
        self.session.record(self.item, record)
        notes = "; ".join(result.get("notes") or [])
        if record.status in NOTHING_COMPARED:
            pytest.skip(f"{record.status}: {record.message}")  # on this CPU: not a result about the backend
        if record.status in PASSING:
            if notes:
                self.item.user_properties.append(("xla_ops_note", notes))
            return record
        repro_file = str(result.get("repro") or "")
        failure = OpFailure(failure_text(record, notes, repro_file, settings.write_repro))
        from pytest_xla_dynamo.triage import for_item, remember

        remember(self.item, for_item(self.item, failure, model=op, backend=backend.name, mode=direction,
                                     status=record.status, repro=command, op=op, repro_file=repro_file))
        raise failure


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """What an op record keeps beside its fields (its JSON ``extra``): compile seconds, samples compared,
    fallback ops by name, the notes on what was compared in part, a crash's signal and the reproducer."""
    samples = result.get("samples") or []
    out = {"compile_seconds": float(result.get("compile_seconds") or 0.0),
           "samples": len(samples), "fallback_ops": dict(result.get("fallbacks") or {}),
           "notes": list(result.get("notes") or [])}
    for key in ("signal", "repro"):
        if result.get(key):
            out[key] = result[key]
    return out


def failure_text(record: CaseRecord, notes: str, repro_file: str, repro_dir: Path | None) -> str:
    """What a failing op case says: status, op, backend and direction, the samples, notes and how to reproduce."""
    lines = [f"{record.status}: {record.name} {record.mode} on {record.backend}: {record.message}"]
    if notes:
        lines.append(f"compared in part: {notes}")
    if repro_file:
        lines.append(f"standalone reproducer: {repro_file} (run: PJRT_DEVICE=CPU python {repro_file})")
    elif repro_dir is None:
        lines.append("a standalone reproducer of the first failing sample: add --xla-write-repro=DIR")
    lines.append(f"rerun: {record.repro}")
    return "\n".join(lines)

"""Graph snapshots: syrupy JSON snapshots of graph signatures, one file per test, under ``snapshots/``.

The snapshots live in the repository's top-level ``snapshots/`` folder (installed:
``pytest_xla_dynamo/snapshots``), one JSON file per test, keys sorted, indent 2; options that change
signatures (tier, patches, dropout) get a variant sub-folder. Imported only where syrupy is installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syrupy.extensions.json import JSONSnapshotExtension

from pytest_xla_dynamo import zoo
from pytest_xla_dynamo.config import XlaConfig
from pytest_xla_dynamo.graphs.signature import diff_signatures
from pytest_xla_dynamo.launch import snapshots_dir, suites_dir
from pytest_xla_dynamo.session import get_session

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion
    from syrupy.location import PyTestLocation


def snapshot_root(test_file: str | Path, rootdir: str | Path | None = None) -> Path:
    """The snapshot folder of a test file: for the bundled suites the top-level ``snapshots/``
    (installed: the ``pytest_xla_dynamo.snapshots`` package), else ``snapshots/`` next to the
    test file's folder (``<root>/tests/test_x.py`` -> ``<root>/snapshots``), kept inside the project: where that
    folder would be outside ``rootdir`` (a test file at the project's top), ``<rootdir>/snapshots``."""
    test_dir = Path(test_file).resolve().parent
    try:
        if test_dir == suites_dir():
            return snapshots_dir()
    except RuntimeError:  # a folder not installed (a partial copy of the package)
        pass
    if rootdir is not None:
        root = Path(rootdir).resolve()
        if not test_dir.parent.is_relative_to(root):
            return root / "snapshots"
    return test_dir.parent / "snapshots"


def variant(xcfg: XlaConfig) -> str:
    """The sub-folder for options that change signatures ('' for the defaults the committed
    snapshots are made with): tier, op patches, dropout policy."""
    parts = []
    if xcfg.tier != "small":
        parts.append(f"tier-{xcfg.tier}")
    if xcfg.patches:
        parts.append("patch-" + ",".join(sorted(xcfg.patches)))
    if xcfg.dropout != "identity":
        parts.append(f"dropout-{xcfg.dropout}")
    return "+".join(parts)


_PARAM_ID = re.compile(r"\[(?P<id>[^\[\]]*)\](?:\[[^\[\]]*\]|\.\d+)?$")


class GraphSnapshotExtension(JSONSnapshotExtension):
    """JSON snapshots (keys sorted, indent 2) under :func:`snapshot_root`, one file per test:
    ``snapshots/test_graphs/test_graph_signature_train[resnet18-trace_once].json``.

    Only the snapshots of cases this session selects are discovered (so running a few models
    reports no other model's snapshot as unused, and ``--snapshot-update`` deletes none of them);
    snapshots of cases that failed before their comparison are neither used nor unused.
    """

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        root = snapshot_root(test_location.filepath, test_location.item.config.rootpath)
        sub = variant(get_session(test_location.item.config).xcfg)
        return str((root / sub if sub else root) / test_location.basename)

    def owns_snapshot_collection(self, *, filepath: str, test_location: PyTestLocation) -> bool:
        if not super().owns_snapshot_collection(filepath=filepath, test_location=test_location):
            return False
        session = get_session(test_location.item.config)
        stem = Path(filepath).name[: -len(".json")]
        if stem in session.unchecked_snapshots:
            return False
        match = _PARAM_ID.search(stem)
        if match is None:
            return True
        xcfg = session.xcfg
        selected = {f"{m}-{b}" for m in xcfg.models for b in xcfg.backends}
        ids = match.group("id")
        # a case of another model or backend than this session's: not this session's business
        return ids in selected or not any(ids.startswith(f"{m}-") for m in zoo.model_names())


def snapshot_stem(snapshot: SnapshotAssertion) -> str:
    return str(snapshot.extension.get_snapshot_name(test_location=snapshot.test_location, index=snapshot.index))


def snapshot_missing(snapshot: SnapshotAssertion) -> bool:
    """Whether the last comparison of ``snapshot`` found no snapshot to compare with."""
    if not snapshot.num_executions:
        return False
    result = snapshot.executions[snapshot.num_executions - 1]
    return result.exception is None and result.recalled_data is None


def compare(snapshot: SnapshotAssertion, signature: Mapping[str, Any], label: str,
            command: str = "pytest ...") -> str | None:
    """Compare ``signature`` with its snapshot (written instead with ``--snapshot-update``);
    None when it matches, else the failure text: the counters that changed, then syrupy's diff."""
    from syrupy.terminal import disable_color

    if snapshot == dict(signature):
        return None
    result = snapshot.executions[snapshot.num_executions - 1]
    location = result.snapshot_location
    update = f"{command} --snapshot-update"
    if result.exception is not None:
        return f"{label}: cannot compare with {location}: {result.exception!r}"
    if result.recalled_data is None:
        return f"{label}: no snapshot at {location}\ncreate it with: {update}"
    try:
        old = json.loads(str(result.recalled_data))
    except ValueError:
        old = None
    changes = diff_signatures(old, signature) if isinstance(old, Mapping) else ["(the snapshot is not JSON)"]
    with disable_color():
        diff = snapshot.get_assert_diff()
    lines = [f"{label}: graph signature changed: " + "; ".join(changes),
             f"snapshot: {location}", "[- snapshot] [+ received]", *diff,
             f"if the change is intended, rewrite the snapshot with: {update}"]
    return "\n".join(lines)

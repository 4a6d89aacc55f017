"""The op server: a child interpreter that runs op cases one after another for the client (:mod:`.client`).

``python -m pytest_xla_dynamo.ops.server SCRATCH``: reads one JSON request a line on stdin (``op``,
``backend``, ``direction``, ``seed``, ``repro_dir``), runs it (:class:`~pytest_xla_dynamo.ops.runner.CaseRunner`)
and answers with one JSON line on the stdout it started with; what torch or the op print goes to stderr
instead, so that it cannot garble an answer. The XLA runtime comes up first (pytorch/xla#4174). An op that
kills the process kills only this server: the client reports the crash and starts another.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def serve(scratch: Path) -> None:
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints go to stderr
    sys.stdout = sys.stderr
    import torch

    from pytest_xla_dynamo.core import devices
    from pytest_xla_dynamo.ops.runner import CaseRunner

    torch.set_num_threads(1)
    device = devices.ensure_runtime()
    runner = CaseRunner(device, scratch)
    answers.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        runner.repro_dir = Path(request["repro_dir"]) if request.get("repro_dir") else None
        answer: dict[str, Any]
        try:
            result = runner.run(request["op"], request["backend"], request["direction"], int(request["seed"]))
            answer = {"result": result.to_dict()}
        except Exception as exc:  # the harness's own failure for this case, said as such
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        answers.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    serve(Path(sys.argv[1]))

"""The op server's client: cases sent to a child interpreter, a crash or a hang contained and reported.

:class:`OpServer` starts ``python -m pytest_xla_dynamo.ops.server`` when it is first asked for a case, sends it
one case at a time and reads the answer within the case's time limit. When the child dies (an op that ends
the process with a signal) the case is ``crash`` with the signal and the last lines the child wrote, when it
does not answer in time it is ended and the case is ``timeout``; either way the reproducer of the sample it
was running is kept (the runner writes it before the backend runs the sample) and the next case starts a new
child. A child is also replaced after :data:`CASES_PER_CHILD` cases, so that what torch_xla keeps of every
graph it compiled does not grow without bound. No torch here.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

CASES_PER_CHILD = 400
START_TIMEOUT = 300.0  # seconds for the child to import torch and bring the runtime up
STDERR_LINES = 6  # last lines of a dead child's stderr in the message
GLOG_LINE = re.compile(r"^[IW]\d{4} ")  # torch's and XLA's info and warning lines: not why a child died


class OpServer:
    """One child at a time, started on demand (see the module docstring)."""

    def __init__(self, *, env: dict[str, str] | None = None) -> None:
        self.env = env
        self.folder = Path(tempfile.mkdtemp(prefix="xla-ops-"))
        self.scratch = self.folder / "current_sample.py"
        self.proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._buffer = b""
        self.cases = 0
        self.started = 0  # children started: one more after every crash, timeout and recycling

    def run(self, op: str, backend: str, direction: str, seed: int, timeout: float,
            repro_dir: Path | None = None) -> dict[str, Any]:
        """The case's result dict (:class:`~pytest_xla_dynamo.ops.runner.CaseResult`), or a ``crash``/``timeout``/
        harness ``error`` dict with ``status`` and ``message``."""
        if self.proc is None or self.cases >= CASES_PER_CHILD:
            self.close()
            problem = self._start()
            if problem:
                return {"status": "fail_to_run", "message": problem, "harness": True}
        assert self.proc is not None and self.proc.stdin is not None
        self.cases += 1
        request = {"op": op, "backend": backend, "direction": direction, "seed": seed,
                   "repro_dir": str(repro_dir) if repro_dir else ""}
        self.scratch.unlink(missing_ok=True)
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        answer = self._answer(timeout)
        if answer is None:
            return self._lost(timeout, repro_dir)
        if "error" in answer:
            return {"status": "fail_to_run", "message": f"the op harness failed: {answer['error']}", "harness": True}
        return dict(answer["result"])

    def _start(self) -> str:
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("PJRT_DEVICE", "CPU")
        self._stderr = (self.folder / "stderr.log").open("w+b")
        self.proc = subprocess.Popen([sys.executable, "-m", "pytest_xla_dynamo.ops.server", str(self.scratch)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        self.started += 1
        self.cases = 0
        self._buffer = b""
        if self._answer(START_TIMEOUT) is None:
            why = self._why_dead() or f"no answer in {START_TIMEOUT:g} s"
            self.close()
            return f"the op server did not start: {why}"
        return ""

    def _answer(self, timeout: float) -> dict[str, Any] | None:
        """The child's next JSON line (None: it died or did not answer within ``timeout`` seconds)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return None
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return dict(json.loads(line))

    def _lost(self, timeout: float, repro_dir: Path | None) -> dict[str, Any]:
        """The case whose child died or hung: ``crash`` with the signal, or ``timeout``; its sample's reproducer
        kept where reproducers are asked for."""
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        source = self.scratch.read_text() if self.scratch.exists() else ""
        found = re.search(r"from sample (\d+) of", source)
        where = f" while running sample {found.group(1)}" if found else ""
        repro = ""
        if repro_dir is not None and source:
            name = re.search(r"python (\S+\.py)", source)
            repro_dir.mkdir(parents=True, exist_ok=True)
            target = repro_dir / (name.group(1) if name else "repro_crash.py")
            shutil.copyfile(self.scratch, target)
            repro = str(target)
        tail = self._why_dead()
        self.close()
        if code is None:
            return {"status": "timeout", "message": f"no result within {timeout:g} s{where}; the process was ended",
                    "repro": repro}
        how = signal.Signals(-code).name if code < 0 and -code in signal.Signals._value2member_map_ else f"exit {code}"
        return {"status": "crash", "message": f"the process died of {how}{where}" + (f": {tail}" if tail else ""),
                "signal": how, "repro": repro}

    def _why_dead(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        lines = [ln for ln in self._stderr.read().decode(errors="replace").splitlines()
                 if ln.strip() and not GLOG_LINE.match(ln)]
        return " | ".join(lines[-STDERR_LINES:])[-800:]

    def close(self) -> None:
        """End the child (if any); the next case starts another."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    if proc.stdin is not None:
                        proc.stdin.close()
                    proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    proc.kill()
                    proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def shutdown(self) -> None:
        """End the child and remove the scratch folder (the session's end)."""
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

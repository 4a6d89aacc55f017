"""The values the core knows: the modes of a step and of tensors, the range of a seed, and the statuses of a case."""

from __future__ import annotations

MODES = ("train", "infer")
DIRECTIONS = ("forward", "backward")  # an op case's direction (the op suite's mode)
TENSOR_MODES = ("eager", "fake")
SEED_MAX = 2**32 - 1  # numpy's range: np.random.seed takes 0..2**32-1

# Accuracy statuses, in the vocabulary of pytorch's benchmarks/dynamo harness.
STATUSES = (
    "pass",
    "pass_due_to_skip",
    "pass_not_captured",  # a dynamo backend's parity passed, but dynamo captured nothing (see core/capture.py)
    "fail_accuracy",
    "fail_to_run",
    "eager_fail_to_run",
    "eager_two_runs_differ",
    "model_fail_to_load",
    "OOM",
    "timeout",
    "fail_graph",  # graph signature changed or a steady-state recompile (graphs suite)
    "cpu_fallback",  # results match, but aten ops ran on the CPU (op suite)
    "crash",  # the process running the case died of a signal (op suite: contained in the op server)
    "unreliable",  # timing disturbed by other load even after a re-measure: the speedup is kept but not trusted
)
UNRELIABLE = "unreliable"
PASSING = ("pass", "pass_due_to_skip")
#: Not in PASSING: a case that compiled nothing did not test the backend; the gate and tables keep it apart.
NOT_CAPTURED = "pass_not_captured"

"""Timing: each backend's steady-state time per iteration against the baseline, through pytest-benchmark.

A wing of its own: its options (``options``: their own ``--help`` group, lab settings ini-only) and settings
(``settings``: frozen, resolved once by ``plugin``, which also applies the thread budget and the page set-up); the
``xla_timing`` check (``check``) opens a case and hands it to a measurement method (``method``: ``in_process``,
``process_median``, ``ab_pairs``); beneath them the timed runs (``measure``), pure arithmetic and rules (``stats``,
``interference``, ``calibrate``, ``noise``, ``across``), pytest-benchmark's part (``benchmark``), the machine's
side (``threads``, ``placement``, ``affinity``, ``memory``). Compilation happens in the prepared case's warm-up
(:data:`pytest_xla_dynamo.core.cases.WARMUP_STEPS` steps), before any timed run. Importing the package (or its
``options``, which every pytest session does) imports nothing else: no torch.
"""

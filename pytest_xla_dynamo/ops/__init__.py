"""The op suite: torch's OpInfo database checked op by op, forward and backward, on each XLA backend.

``suites/test_ops.py`` is parametrized over ``--xla-ops`` (:mod:`.catalog`), each case runs in the op server's
child process (:mod:`.client`, :mod:`.server`: a crash ends the server, not the session) and is judged sample by
sample against CPU eager and fp64 (:mod:`.runner`, :mod:`.checks`); a failing sample can be written out as a
standalone reproducer (:mod:`.repro`). The wing's session part is :mod:`.plugin`. No torch at import.
"""

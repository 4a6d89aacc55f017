"""The process layer: how a session's tests are spread over processes and CPUs.

Isolated tests (:mod:`.isolation`) and snippets (:mod:`.snippets`) in child processes (:mod:`.processes`),
shards (:mod:`.sharding`), pytest-xdist's hooks and schedule (:mod:`.xdist_hooks`, :mod:`.xdist_schedule`),
the machine lock (:mod:`.machine_lock`), the CPU ISA (:mod:`.cpu_isa`) and how many workers
``./run.sh suite`` runs (:mod:`.suite_workers`).
"""

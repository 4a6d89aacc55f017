"""The process layer: how a session's tests are spread over processes and CPUs.

Isolated tests (:mod:`.isolation`) and snippets (:mod:`.snippets`) in child processes (:mod:`.processes`),
shards (:mod:`.sharding`), the xdist schedule (:mod:`.xdist_schedule`) and the CPU ISA (:mod:`.cpu_isa`).
"""

#!/bin/bash
# pilot: the seed table at the defaults with torch's THP_MEM_ALLOC_ENABLE=1 and --xla-isolate (a fresh process per case), three sessions (AMD EPYC VM)
cd /work/main
export PJRT_DEVICE=CPU MALLOC_ARENA_MAX=1 THP_MEM_ALLOC_ENABLE=1
OUT=/tmp/s24/thp-isolate
echo "start $(date +%T)"
for i in 1 2 3; do
  echo "== session $i $(date +%T)"
  .venv/bin/python benchmarks/timing_runs.py --runs $i --first $i --out $OUT \
    --xla-backend=trace_once,trace_everytime --xla-isolate > /tmp/s24/thp-isolate-$i.out 2>&1
  echo "   exit $? $(date +%T)"
done
echo "end $(date +%T)"

#!/bin/bash
# interleaved: the seed table at the defaults, unpinned vs pinned to CPU 0, three sessions each (AMD EPYC VM)
cd /work/main
export PJRT_DEVICE=CPU MALLOC_ARENA_MAX=1
OUT=docs/results/small-defaults-pinned-ab
echo "start $(date +%T)"
for i in 1 2 3; do
  for s in unpinned pinned; do
    extra=""; [ $s = pinned ] && extra="--xla-timing-cpus=0"
    echo "== session $i $s $(date +%T)"
    .venv/bin/python benchmarks/timing_runs.py --runs $i --first $i --out $OUT/$s \
      --xla-backend=trace_once,trace_everytime $extra > /tmp/s23/$s-$i.out 2>&1
    echo "   exit $? $(date +%T)"
  done
done
echo "end $(date +%T)"

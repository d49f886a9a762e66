#!/usr/bin/env bash
# Judge the teacher pool (benchmarks/teacher_pool.py) chunk by chunk with `csem annotate`.
# Resumable: a chunk whose judged/chunk-K.jsonl.gz exists is skipped, and the SQLite cache
# (benchmarks/data/teacher_pool/cache.sqlite, git-ignored) keeps every judgment of a killed chunk.
#
#   nohup nice -n 5 bash benchmarks/teacher_pool_judge.sh > benchmarks/.cache/teacher_pool/judge.log 2>&1 &
#
# Environment: JUDGE (default llama-cpp:qwen-0.5b), RUBRIC (csem/summ-relevance-ref-free),
# THREADS (llama.cpp threads, default 1), FIRST / LAST (chunk range, default all), FORM (a name: judge
# the pool again under another JUDGE / RUBRIC into forms/FORM/, test candidates first; e.g.
#   FORM=geval-relevance RUBRIC=geval/summeval-relevance LAST=10 bash benchmarks/teacher_pool_judge.sh
# judges the 1,018 test candidates with G-Eval's wording of relevance), EXTENSION=1 (the extension
# candidates the GPU run left, judged by the pool's own judge into judged/ext-K.jsonl.gz; two processes
# on two cores: EXTENSION=1 FIRST=0 LAST=36 ... and EXTENSION=1 FIRST=37 ...).
set -u
cd "$(dirname "$0")/.."
JUDGE=${JUDGE:-llama-cpp:qwen-0.5b}
RUBRIC=${RUBRIC:-csem/summ-relevance-ref-free}
THREADS=${THREADS:-1}
POOL=benchmarks/data/teacher_pool
WORK=benchmarks/.cache/teacher_pool
FORM=${FORM:-}
DEST="$POOL/judged"
EXT=()
NAME=chunk
if [ -n "${EXTENSION:-}" ]; then EXT=(--extension); NAME=ext; fi
if [ -n "$FORM" ]; then WORK="$WORK/forms/$FORM"; DEST="$POOL/forms/$FORM"; fi
mkdir -p "$WORK" "$DEST"
N=$(python benchmarks/teacher_pool.py n-chunks --form "$FORM" "${EXT[@]}")
FIRST=${FIRST:-0}
LAST=${LAST:-$((N - 1))}
for k in $(seq "$FIRST" "$LAST"); do
  kk=$(printf '%04d' "$k")
  [ -f "$DEST/$NAME-$kk.jsonl.gz" ] && continue
  in=$(python benchmarks/teacher_pool.py chunk "$k" --form "$FORM" "${EXT[@]}") || exit 1
  started=$(date -u +%FT%TZ); t0=$(date +%s.%N)
  csem annotate --data "$in" --out "$WORK/$NAME-$kk.judged.jsonl" --rubric "$RUBRIC" --judge "$JUDGE" \
    --mode probs --cache "$POOL/cache.sqlite" --judge-opt n_threads="$THREADS" --judge-opt n_ctx=8192 \
    2>&1 | tee "$WORK/$NAME-$kk.log"
  rc=${PIPESTATUS[0]}
  # the judgments this call made (the rest were cache hits): "(48 judged, 52 cached, ...)"
  new=$(tr -s ' \n' ' ' < "$WORK/$NAME-$kk.log" | grep -o '[0-9]* judged,' | tail -1 | grep -o '[0-9]*')
  t1=$(date +%s.%N); finished=$(date -u +%FT%TZ)
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
    echo "chunk $k: csem annotate exited $rc; stopping" >&2
    exit "$rc"
  fi
  python benchmarks/teacher_pool.py compact "$k" --form "$FORM" "${EXT[@]}" --seconds "$(echo "$t1 - $t0" | bc)" \
    --started "$started" --finished "$finished" ${new:+--new "$new"} || exit 1
  echo "chunk $k done ($started -> $finished)"
done

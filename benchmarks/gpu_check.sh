#!/usr/bin/env bash
# One GPU check for attn-dyn (issue 14), within 10 minutes on an H100-class card:
#   conformance of the core on CuPy and torch CUDA, CNN throughput (goal >= 20,000
#   mosaics/s at m = 5, batch 100), the batched-seed benchmarks where they exist,
#   IBM-1 EM on the GPU against the CPU (Multi30k), and a short CUDA run of each
#   experiment command that exists. Ends with one table naming the card.
#
#   benchmarks/gpu_check.sh [--dry-run] [--out DIR] [--budget SECONDS] [--only REGEX]
#
# --only runs the checks whose names match REGEX (grep -E): `--only '^speed_'` is the
# issue-19 speed checks alone (whole-step capture of the batched CNN FCAM, Snell's
# training steps and the paper-size SST-2 agreement row); a REGEX grep cannot read, or
# one that matches no check, is an error.
# --dry-run lists every check, its command and whether it would run, and exits 0.
# Each check has its own time limit, cut to what is left of the total budget
# (default 570 s); with under 30 s left a check is skipped and says so. Logs go to DIR (default gpu_check_out/).
# Data: $ATTN_DYN_DATA (default ../shared/data beside the checkout, else ./shared/data).
# Extra options for commands whose options this script cannot know in advance:
#   GPU_CHECK_SYNTHETIC_ARGS, GPU_CHECK_AGREEMENT_ARGS (appended to the defaults);
#   GPU_CHECK_ROW_LIMIT: the paper-size SST-2 row's --time-limit (default 150 s), so it
#   ends inside its 240 s and its last line says how far its models got and where the
#   time went; GPU_CHECK_M30K_LIMIT the same for the Multi30k row (default 150 s of 300:
#   it evaluates every 2,000 steps, so a model may train a minute past the limit).
set -u
cd "$(dirname "$0")/.."

DRY=0
OUT=gpu_check_out
BUDGET=570
ONLY=.
while [ $# -gt 0 ]; do
  case "$1" in
    --out|--budget|--only)
      [ $# -ge 2 ] || { echo "Error: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --dry-run) DRY=1 ;;
    --out) OUT="$2"; shift ;;
    --budget) BUDGET="$2"; shift ;;
    --only) ONLY="$2"; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 0 ;;   # the header
    *) echo "Error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
. benchmarks/_budget.sh
read_budget "$BUDGET"
grep -Eq -- "$ONLY" </dev/null 2>/dev/null
if [ $? = 2 ]; then
  echo "Error: --only '$ONLY' is not a regular expression grep -E reads" >&2; exit 2
fi

export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
PY=${PYTHON:-python}
if [ -n "${ATTN_DYN_DATA:-}" ]; then DATA=$ATTN_DYN_DATA
elif [ -d ../shared/data ]; then DATA=../shared/data
else DATA=shared/data
fi
if command -v attn-dyn >/dev/null 2>&1; then CLI=attn-dyn
else CLI="$PY -m minimal_attn.cli.main"    # words: the commands below split it
fi

has_file() { [ -f "$1" ]; }
has_command() { $CLI "$1" --help >/dev/null 2>&1; }
help_mentions() { $CLI "$1" --help 2>/dev/null | grep -q -- "$2"; }

# name | time limit (s) | condition (shell, empty = always) | command
CHECKS=(
  "conformance_cupy|90||$PY -m pytest -q -rs tests/test_conformance.py tests/test_backends.py -k cupy"
  "conformance_torch_cuda|90||$PY -m pytest -q -rs tests/test_conformance.py tests/test_backends.py tests/test_torch_backend.py -k 'torch_cuda or cuda'"
  "cnn_throughput|60|has_file benchmarks/bench_cnn_throughput.py|$PY benchmarks/bench_cnn_throughput.py --device cuda --m 5 --batch 100 --steps 20 --rounds 3"
  "batched_seeds|90|has_file benchmarks/bench_batched_seeds.py|$PY benchmarks/bench_batched_seeds.py --device cuda --seeds 12 --paradigm ha --n-train 1000 --n-test 200 --epochs 1 --batch 100"
  "synthetic_seeds|60|has_file benchmarks/bench_synthetic_seeds.py|$PY benchmarks/bench_synthetic_seeds.py --device cuda --hidden 256 --embed 256 --steps 30"
  "ibm1_gpu_vs_cpu|60|[ -d $DATA/multi30k ]|$PY benchmarks/bench_ibm1.py --data $DATA/multi30k --device cuda --skip-nltk --repeats 2"
  "train_cuda|90|[ -d $DATA/cifar10 ]|$CLI train --dataset cifar10 --data-dir $DATA/cifar10 --m 5 --paradigm all --epochs 2 --seeds 2 --n-train 2000 --n-test 500 --batch-seeds --device cuda --no-progress --out $OUT/train"
  "train_hatexplain_cuda|60|help_mentions train hatexplain && [ -d $DATA/hatexplain ]|$CLI train --backend torch --dataset hatexplain --data-dir $DATA/hatexplain --embedding self-attention --paradigm all --epochs 2 --device cuda --no-progress --out $OUT/hatexplain"
  "synthetic_cuda|90|has_command synthetic|$CLI synthetic copy --paper-size --seeds 20 --steps 500 --device cuda --no-progress --out $OUT/synthetic ${GPU_CHECK_SYNTHETIC_ARGS:-}"
  "agreement_cuda|120|has_command agreement && [ -d $DATA/sst2 ]|$CLI agreement --task classify --dataset sst2 --data-dir $DATA/sst2 --steps 1000 --max-train 20000 --device cuda --no-progress --out $OUT/agreement ${GPU_CHECK_AGREEMENT_ARGS:-}"
  # issue 19 speed: the step captured whole (tests first: graph vs eager), its mosaics/s
  # and operator counts; Snell's training steps old route vs new, and where a step's time
  # goes (host, kernels, host waits: benchmarks/snell_profile.py); the paper-size SST-2 row
  # (after the proxy's test on the card: the row runs either way, and the check fails if
  # either does)
  "speed_step_tests|150||$PY -m pytest -q -rs -p no:cacheprovider tests/test_batched_step.py tests/test_batched_flat.py tests/test_torch_batched.py tests/test_authors_recipe.py"
  "speed_batched_capture|180|has_file benchmarks/bench_batched_seeds.py|$PY benchmarks/bench_batched_seeds.py --device cuda --seeds 12 --paradigm ha --n-train 2000 --n-test 500 --batch 100 --optimizer adam --classifier lenet --modes grouped_nchw --compile none,cudagraph,compile --no-sequential --epochs 2"
  "speed_batched_precision|150|has_file tests/test_batched_precision.py|$PY -m pytest -q -rs -p no:cacheprovider tests/test_batched_precision.py -k cuda && $PY benchmarks/bench_batched_seeds.py --device cuda --seeds 12 --paradigm ha --n-train 2000 --n-test 500 --batch 100 --optimizer adam --classifier lenet --modes grouped_nchw --compile none --precision fp32,tf32,bf16 --no-sequential --epochs 2"
  "speed_batched_profile|60|has_file benchmarks/bench_batched_seeds.py|$PY benchmarks/bench_batched_seeds.py --device cuda --profile --seeds 12 --batch 100 --optimizer adam --classifier lenet --modes grouped_nchw,grouped,loop,unfold --compile none,cudagraph"
  "speed_batched_modes|180|has_file benchmarks/bench_batched_seeds.py|$PY -m pytest -q -rs -p no:cacheprovider tests/test_batched_step.py -k cuda_graph && $PY benchmarks/bench_batched_seeds.py --device cuda --seeds 12 --paradigm ha --n-train 2000 --n-test 500 --batch 100 --optimizer adam --classifier lenet --modes grouped_nchw,grouped,loop,unfold --compile none,cudagraph --precision fp32,tf32,bf16 --no-sequential --epochs 2"
  "speed_snell_steps_sst2|90|[ -d $DATA/sst2 ]|$PY benchmarks/bench_snell_agreement.py --dataset sst2 --data-dir $DATA/sst2 --device cuda --train-steps-only --steps 300 --profile"
  "speed_snell_steps_multi30k|90|[ -d $DATA/multi30k ]|$PY benchmarks/bench_snell_agreement.py --dataset multi30k --data-dir $DATA/multi30k --device cuda --train-steps-only --steps 300 --profile"
  "speed_agreement_sst2_paper|240|has_command agreement && [ -d $DATA/sst2 ]|$PY -m pytest -q -p no:cacheprovider tests/test_proxy_fast.py -k card; t=\$?; $CLI agreement --task classify --dataset sst2 --data-dir $DATA/sst2 --device cuda --workers 6 --time-limit ${GPU_CHECK_ROW_LIMIT:-150} --no-progress --out $OUT/agreement_paper || exit; exit \$t"
  "speed_synthetic_graph|120|has_file tests/test_synthetic_graph.py|$PY -m pytest -q -rs -p no:cacheprovider tests/test_synthetic_graph.py -k cuda && for p in sa ha; do $PY benchmarks/bench_synthetic_seeds.py --device cuda --hidden 256 --embed 256 --steps 100 --task permutation --seeds 40 --paradigm \$p --compile none,cudagraph --no-sequential || exit 1; done"
  # how K models share the card: K processes (a row's workers) against K threads of one
  # process on their own CUDA streams, against one alone
  "speed_snell_sharing_sst2|90|[ -d $DATA/sst2 ]|$PY benchmarks/bench_snell_sharing.py --dataset sst2 --data-dir $DATA/sst2 --device cuda --copies 4 --steps 200"
  "speed_snell_sharing_multi30k|150|[ -d $DATA/multi30k ]|$PY benchmarks/bench_snell_sharing.py --dataset multi30k --data-dir $DATA/multi30k --device cuda --copies 3 --steps 150"
  # the Multi30k row (20,000 steps a model) cannot end inside one check: under a limit its
  # last line gives each model's steps and seconds, from which the whole row's time follows
  "speed_agreement_multi30k_paper|300|has_command agreement && [ -d $DATA/multi30k ]|$CLI agreement --task translate --dataset multi30k --data-dir $DATA/multi30k --device cuda --workers 6 --time-limit ${GPU_CHECK_M30K_LIMIT:-150} --no-progress --out $OUT/agreement_m30k_paper"
)
SELECTED=()
for entry in "${CHECKS[@]}"; do
  echo "${entry%%|*}" | grep -Eq -- "$ONLY" && SELECTED+=("$entry")
done
if [ "${#SELECTED[@]}" = 0 ]; then
  echo "Error: --only '$ONLY' matches none of the checks (--dry-run lists them)" >&2; exit 2
fi
CHECKS=("${SELECTED[@]}")

card_name() {
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -n 1
  else
    $PY -c "import torch; print(torch.cuda.get_device_name(0))" 2>/dev/null || echo "no GPU found"
  fi
}

if [ "$DRY" = 1 ]; then
  echo "gpu_check dry run: ${#CHECKS[@]} checks, budget ${BUDGET} s, data $DATA"
  for entry in "${CHECKS[@]}"; do
    IFS='|' read -r name limit cond cmd <<<"$entry"
    if [ -z "$cond" ] || eval "$cond"; then state="would run"; else state="would skip (absent)"; fi
    printf '%-24s %4ss  %-20s %s\n' "$name" "$limit" "$state" "$cmd"
  done
  exit 0
fi

mkdir -p "$OUT"
START=$SECONDS
ROWS=()
FAILED=0
for entry in "${CHECKS[@]}"; do
  IFS='|' read -r name limit cond cmd <<<"$entry"
  if [ -n "$cond" ] && ! eval "$cond"; then
    ROWS+=("$name|SKIP|-|absent: $cond"); continue
  fi
  left=$(( BUDGET - (SECONDS - START) ))
  if [ "$left" -lt 30 ]; then
    ROWS+=("$name|SKIP|-|only ${left} s left of the ${BUDGET} s budget"); continue
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  echo "== $name: $cmd" | tee "$OUT/$name.log"
  t0=$SECONDS
  timeout "$limit" bash -c "$cmd" >>"$OUT/$name.log" 2>&1
  rc=$?
  took=$(( SECONDS - t0 ))
  last=$(grep -v '^\s*$' "$OUT/$name.log" | tail -n 1 | cut -c1-90)
  if [ "$rc" = 0 ] && echo "$last" | grep -q skipped && ! echo "$last" | grep -q passed; then
    state="SKIP (all)"                      # e.g. CuPy absent: pytest skipped every test
  elif [ "$rc" = 0 ]; then state=PASS
  elif [ "$rc" = 124 ]; then state=TIMEOUT; FAILED=1
  else state="FAIL($rc)"; FAILED=1
  fi
  ROWS+=("$name|$state|${took} s|$last")
  tail -n 5 "$OUT/$name.log"
done

# files deeper than $OUT/a/b/ do not come back from the device machine: the small ones
# (a row's per-model timing.json, histories, settings) travel in one archive
( cd "$OUT" && find . -mindepth 3 -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' \) \
    -print0 | tar czf deep_files.tar.gz --null -T - ) 2>/dev/null
{
  echo
  echo "## attn-dyn GPU check on: $(card_name)  (total $(( SECONDS - START )) s)"
  echo
  echo "| check | status | time | last line of its log |"
  echo "|---|---|---|---|"
  for row in "${ROWS[@]}"; do
    IFS='|' read -r a b c d <<<"$row"
    echo "| $a | $b | $c | $d |"
  done
} | tee "$OUT/summary.md"
exit $FAILED

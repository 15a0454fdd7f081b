#!/usr/bin/env bash
# Paper-size cells on a GPU machine, within a time budget (issue 19).
#
#   benchmarks/gpu_cells.sh --prepare CELL...     on the development machine: copy the data
#                                                 the cells need into .gpu_data/ (ignored) and
#                                                 the wheels attn-dyn needs into .whl/
#   benchmarks/gpu_cells.sh [--dry-run] [--budget SECONDS] [--card auto|h100|h200|cpu]
#                           [--parallel N|auto] CELL...
#                                                 on the GPU machine (carry .gpu_data and .whl)
#
# Runs the cells in the order given (default: every paper-scale cell in run order that
# has no complete record in results/cells yet) until
# the budget (default 480 s) is spent, N at a time (default 1; small models leave a GPU
# idle between kernel launches, so a few processes share it well; auto: the N, up to
# GPU_CELLS_MAX_PARALLEL (4), under which the most cells would finish by their estimates,
# cell_costs.choose_parallel, chosen again after the step probe). The first N cells
# always run; a later one whose estimate (under a stop rule: from a finished cell of the
# same recipe, cell_costs.stop_rule_epochs, else an upper bound) exceeds what
# is left is skipped and says so, unless --force (and any later cell with under
# GPU_CELLS_MIN_START, default 150, seconds left). A CNN FCAM or synthetic cell gets
# --time-limit: it stops training MARGIN (60) s before the budget ends (at an epoch end,
# or an evaluation) and records what was cut short (a partial record, marked so in the
# tables); a Table 2 row stops T2_MARGIN (150) s before it, leaving time for its proxy
# and its agreement curves; the HateXplain cells are stopped at the budget (SIGTERM; any
# cell still running 20 s after it is killed).
# Each finished cell writes results/cells/NAME.json (a cell in parts NAME@K.json), copied
# into $OUT/cells/ as soon as the cell ends (when $OUT is set: what comes back of a job the
# machine ends early); at the end all records go into $OUT/cells_results.tar.gz with a
# summary (ending in the tables of the records the job wrote, as `cells report` gives
# them), to bring home here with `attn-dyn cells import cells_results.tar.gz` (or, without
# the archive, `attn-dyn cells import cells`; it keeps a complete record over a partial
# one), then `attn-dyn cells report`; the small files of the job's run folders (history,
# settings, results; no checkpoints) go into $OUT/cells_runs.tar.gz, for `cells plot`; on
# a card, $OUT/gpu_dmon.txt has its load while the cells ran (nvidia-smi dmon -s u).
# --dry-run lists the cells, their estimated minutes on --card and what would run.
# --card auto (the default) reads the card's name from nvidia-smi: an H200 is h200, an
# H100 h100; with GPU_CELLS_DEVICE=cpu it is cpu; anything else gets h100's estimates.
# GPU_CELLS_DEVICE=cpu runs the same path on the CPU (a smoke test with tiny-* cells);
# GPU_CELLS_COMPILE=cudagraph|compile runs the CNN FCAM cells' steps that way (default none);
# GPU_CELLS_COMPILE=auto first probes, inside the budget (about a minute on a card): the
# captured way's and the conv modes' equality tests on this card, then the conv modes
# GPU_CELLS_PROBE_MODES (default grouped_nchw,loop) each eager and captured at a part's
# size (bench_batched_seeds.py, 3 seeds, m = 5, HA, Adam); the cells take the fastest
# (--conv-mode, --compile) when the tests pass and it is at least 1.1x as fast as
# grouped_nchw eager (step_probe.pick_step), else that, and the estimates are divided by
# how much faster the probe ran it than cell_costs' model of a step
# (step_probe.probe_scale). The captured way: GPU_CELLS_PROBE (default cudagraph; compile
# on the CPU); the probe's size: GPU_CELLS_PROBE_ARGS.
# The synthetic cells' steps run as CUDA graphs on a card (GPU_CELLS_SYNTH_COMPILE,
# default cudagraph there, none on the CPU): each graph is checked against an eager step
# when captured and the cell goes on eagerly if it differs (its record says which ran).
set -u
cd "$(dirname "$0")/.."

DRY=0; PREP=0; FORCE=0; BUDGET=480; CARD=auto; DATA=.gpu_data; PARALLEL=1; MARGIN=60
T2_MARGIN=150
MIN_START=${GPU_CELLS_MIN_START:-150}   # a later cell starts only with this much time left
CELLS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --budget|--card|--parallel|--data)
      [ $# -ge 2 ] || { echo "Error: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --dry-run) DRY=1 ;;
    --prepare) PREP=1 ;;
    --force) FORCE=1 ;;
    --budget) BUDGET="$2"; shift ;;
    --card) CARD="$2"; shift ;;
    --parallel) PARALLEL="$2"; shift ;;
    --data) DATA="$2"; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 0 ;;   # the header
    -*) echo "Error: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) CELLS+=("$1") ;;
  esac
  shift
done
. benchmarks/_budget.sh
read_budget "$BUDGET"
case "$CARD" in
  auto|h100|h200|cpu) ;;
  *) echo "Error: --card must be auto, h100, h200 or cpu, got '$CARD'" >&2; exit 2 ;;
esac
CARD_NOTE=""
if [ "$CARD" = auto ]; then   # the machine a plain call gets may be either card
  NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  case "${GPU_CELLS_DEVICE:-cuda}|$NAME" in
    cpu\|*) CARD=cpu ;;
    *H200*) CARD=h200 ;;
    *H100*) CARD=h100 ;;
    *) CARD=h100; CARD_NOTE=" (--card auto: no H100 or H200 here, ${NAME:-no nvidia-smi}: h100's estimates)" ;;
  esac
fi
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || PY=python
ATTN="$PY -m minimal_attn.cli.main"

need_install() { ! $PY -c "import minimal_attn.backends, array_api_compat" >/dev/null 2>&1; }
if need_install; then     # on the GPU machine: install from the carried wheels
  if [ "$PREP" = 0 ] && [ "$DRY" = 0 ]; then
    if ls .whl/*.whl >/dev/null 2>&1; then
      $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    fi
    $PY -m pip install -q --no-index --no-deps --no-build-isolation -e . \
      || { echo "Error: cannot install attn-dyn here (pip install -e . failed)" >&2; exit 2; }
  fi
  if need_install; then   # a dry run or --prepare installs nothing: it needs attn-dyn there
    echo "Error: $PY cannot import attn-dyn (minimal_attn.backends, array_api_compat):" \
      "install it first (pip install -e .) or name the Python that has it in PYTHON" >&2
    exit 2
  fi
fi

# cell -> its data folder, estimated minutes alone on the card and seconds beside the
# other PARALLEL - 1 cells (one line each); CNN FCAM cells' times divided by SPEEDUP
SPEEDUP=1
plan() {   # $1: the seconds the cells have (for --parallel auto); then a first line
  # "# parallel N ..." with the count of cells side by side
  $PY - "$CARD" "$PARALLEL" "$SPEEDUP" "$1" "$FORCE" "$MIN_START" "$MARGIN" \
    "${GPU_CELLS_MAX_PARALLEL:-4}" "$DATA" "$PREP" "${CELLS[@]}" <<'PYEOF'
import os
import sys
from minimal_attn.errors import InputError
from minimal_attn.experiments import cells
from minimal_attn.experiments.cell_costs import choose_parallel, shared_slowdown
from minimal_attn.experiments.results_store import read_cells
card, parallel, speedup, budget, force, min_start, margin, most, data, prep = sys.argv[1:11]
speedup, budget, names = float(speedup), int(budget), sys.argv[11:]


def has_data(name):      # the complete CIFAR-10 is made from its JPEG bytes on the spot
    folder = cells.get_cell(name).data
    return not folder or any(os.path.isdir(os.path.join(data, f)) for f in
                             {"cifar10-full": ("cifar10-full", "cifar10-jpeg")}.get(folder,
                                                                                    (folder,)))


# by default every paper-size cell that has no complete record yet (cut short by a
# time limit counts as not complete), as its unfinished parts where it has parts, whose
# data this job carries (--prepare: all of them); named cells and parts always run
if not names:
    names, waiting = cells.unfinished(), cells.waiting()
    if waiting:
        print(f"# waiting for the records of parts they read: {' '.join(waiting)}")
    if prep == "0":
        names, absent = [n for n in names if has_data(n)], [n for n in names if not has_data(n)]
        if absent:
            print(f"# without their data under {data}: {len(absent)} cells and parts left out")
elif prep == "0":            # named cells run anyway: say which would stop for want of data
    def lacks_data(name):
        try:
            return not has_data(name)
        except InputError:
            return False          # a bad name: refused below in one line
    absent = [n for n in names if lacks_data(n)]
    if absent:
        print(f"# without their data under {data}: {' '.join(absent)} (named: each would "
              "stop at once; --prepare copies it)")
rows, records, catalogue = [], read_cells("results"), cells.all_cells()
for n in names:
    try:
        c = cells.get_cell(n)
    except InputError as err:
        sys.exit(f"Error: {err}")
    rows.append((n, c.data or "-", cells.expected_seconds(c, card, records, catalogue)
                 / (speedup if c.settings["runner"] == "fcam" else 1)))
if parallel == "auto":
    parallel, done = choose_parallel([(n, alone) for n, _, alone in rows], budget, int(most),
                                     force == "1", int(min_start), int(margin))
    print(f"# parallel {parallel} (auto: {done} cells would finish in {budget} s)")
elif not parallel.isdigit() or int(parallel) < 1:
    sys.exit(f"Error: --parallel must be a count >= 1 or auto, got {parallel!r}")
else:
    print(f"# parallel {parallel}")
for n, folder, alone in rows:
    print(n, folder, f"{alone / 60:.1f}", round(alone * shared_slowdown(int(parallel))))
PYEOF
}
# PLAN: the cells, one line each; N: how many run side by side (--parallel, or auto's choice)
set_plan() {
  local out
  out=$(plan "$1") || exit 2
  N=$(echo "$out" | sed -n 's/^# parallel \([0-9]*\).*/\1/p')
  PLAN_NOTE=$(echo "$out" | sed -n 's/^# \(parallel .*\)/\1/p')
  DATA_NOTE=$(echo "$out" | sed -n 's/^# \(without .*\|waiting .*\)/\1/p')
  PLAN=$(echo "$out" | grep -v '^#')
}
set_plan "$BUDGET"

if [ "$PREP" = 1 ]; then
  SRC=${ATTN_DYN_DATA:-../shared/data}
  COPY=()                   # the folders to copy, each found before anything is written
  for folder in $(echo "$PLAN" | awk '{print $2}' | sort -u); do
    case "$folder" in -) continue ;; cifar10-full) folder=cifar10-jpeg ;; esac
    [ -d "$DATA/$folder" ] && continue
    if [ ! -d "$SRC/$folder" ]; then
      echo "Error: the cells' data folder $SRC/$folder does not exist; set ATTN_DYN_DATA to" \
        "the folder that holds $folder (default ../shared/data)" >&2
      exit 2
    fi
    COPY+=("$folder")
  done
  mkdir -p "$DATA" .whl
  for folder in "${COPY[@]}"; do   # under another name until whole: a rerun skips a folder
    rm -rf "$DATA/.partial-$folder"                                     # that is there
    if ! err=$(cp -r "$SRC/$folder" "$DATA/.partial-$folder" 2>&1 \
        && mv "$DATA/.partial-$folder" "$DATA/$folder" 2>&1); then
      rm -rf "$DATA/.partial-$folder" "$DATA/PROVENANCE"
      echo "Error: could not copy $SRC/$folder into $DATA/ ($(echo "$err" | head -n 1));" \
        "nothing of it was kept" >&2
      exit 2
    fi
  done
  $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform any -d .whl "array-api-compat>=1.4" \
    || echo "warning: could not fetch the array-api-compat wheel into .whl/" >&2
  # the commit this copy is made from (the GPU machine's .git, if any, may be older), the
  # tracked files and a hash of their contents, checked again there
  git ls-files >"$DATA/FILES"
  { echo "ATTN_DYN_COMMIT=$(git rev-parse HEAD 2>/dev/null)"
    if git status --porcelain --untracked-files=no 2>/dev/null | grep -q .; then echo ATTN_DYN_DIRTY=1
    else echo ATTN_DYN_DIRTY=0; fi
    echo "ATTN_DYN_CONTENT=$(tr '\n' '\0' <"$DATA/FILES" | xargs -0 cat 2>/dev/null | sha1sum | cut -c1-40)"
  } >"$DATA/PROVENANCE"
  du -sh "$DATA" .whl
  echo "carry: [\"$DATA\", \".whl\"]  (with the repository at most 64 MiB)"
  exit 0
fi

if [ "$DRY" = 1 ]; then
  echo "gpu_cells dry run: budget ${BUDGET} s, card $CARD$CARD_NOTE, $PLAN_NOTE at a time, data $DATA"
  echo "(minutes: one cell alone on the card; under a stop rule 1.5x the epochs a finished cell of the same recipe took, else every allowed epoch)"
  [ -n "$DATA_NOTE" ] && echo "$DATA_NOTE" | sed 's/.*/(&)/'
  echo "$PLAN" | $PY -c '
import sys
from minimal_attn.experiments.cell_costs import plan_job, shared_slowdown
budget, parallel, force, min_start = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
rows = [line.split() for line in sys.stdin if line.strip()]
slow = shared_slowdown(parallel)
states = plan_job([(r[0], float(r[3]) / slow) for r in rows], budget, parallel, force, min_start,
                  int(sys.argv[5]))
for (name, folder, minutes, _), (_, state) in zip(rows, states):
    print(f"{name:34s} {folder:13s} {minutes:>7s} min  {state}")
' "$BUDGET" "$N" "$FORCE" "$MIN_START" "$MARGIN"
  exit 0
fi

# provenance of this copy (written by --prepare): dirty if a tracked file changed since
if [ -f "$DATA/PROVENANCE" ] && [ -f "$DATA/FILES" ]; then
  set -a; . "$DATA/PROVENANCE"; set +a
  now=$(tr '\n' '\0' <"$DATA/FILES" | xargs -0 cat 2>/dev/null | sha1sum | cut -c1-40)
  [ "$now" = "${ATTN_DYN_CONTENT:-}" ] || export ATTN_DYN_DIRTY=1
fi

# data: the complete CIFAR-10 from its JPEG bytes (about 10 s)
if echo "$PLAN" | grep -q cifar10-full && [ ! -d "$DATA/cifar10-full/cifar-10-batches-py" ]; then
  $PY "$DATA/cifar10-jpeg/to_pickles.py" "$DATA/cifar10-full" \
    || { echo "Error: could not write $DATA/cifar10-full (run --prepare first)" >&2; exit 2; }
fi

START=$SECONDS; ROWS=(); FAILED=0; started=0
mkdir -p runs/cells
STEP=${GPU_CELLS_COMPILE:-none}; STEP_NOTE=""; CONV=""
probe_step() {   # GPU_CELLS_COMPILE=auto: leave "mode|way|speed-up|reason" on stdout
  local device=${GPU_CELLS_DEVICE:-cuda} log=runs/cells/step_probe.log passed=0 way test
  way=${GPU_CELLS_PROBE:-$([ "$device" = cpu ] && echo compile || echo cudagraph)}
  case "$way" in
    cudagraph) test=cuda_graph_step_equals_eager ;;
    compile) test=compiled_step_equals_eager ;;
    *) echo "grouped_nchw|none|1|eager: GPU_CELLS_PROBE must be cudagraph or compile, got $way"
       return ;;
  esac
  rm -f runs/cells/step_probe.json
  # the captured steps against eager, and each mode against separate models (float64);
  # unfold's only when it is probed
  local modes=${GPU_CELLS_PROBE_MODES:-grouped_nchw,loop}
  local select="$test or (separate_forwards and $device)"
  case ",$modes," in *,unfold,*) ;; *) select="($select) and not unfold" ;; esac
  timeout -k 10 90 $PY -m pytest -q -p no:cacheprovider tests/test_batched_step.py \
    tests/test_torch_batched.py -k "$select" \
    >"$log" 2>&1 && tail -n 1 "$log" | grep -q passed && ! tail -n 1 "$log" | grep -q skipped \
    && passed=1
  # shellcheck disable=SC2086   # the probe's size: words, as given
  timeout -k 10 90 $PY benchmarks/bench_batched_seeds.py --device "$device" --seeds 3 --m 5 \
    --paradigm ha --batch 100 --optimizer adam --classifier lenet \
    --modes "$modes" \
    --compile "none,$way" --no-sequential \
    ${GPU_CELLS_PROBE_ARGS:---n-train 3000 --n-test 500 --rounds 3} \
    --json runs/cells/step_probe.json >>"$log" 2>&1
  local rc=$?
  [ "$rc" = 0 ] || echo "bench_batched_seeds.py: exit status $rc (124: past its 90 s)" >>"$log"
  $PY - "$passed" "$CARD" <<'PYEOF' 2>>"$log" || echo "grouped_nchw|none|1|eager: the probe failed (runs/cells/step_probe.log)"
import json, sys
from minimal_attn.experiments.step_probe import pick_step, probe_scale, variant_name
probe = json.load(open("runs/cells/step_probe.json"))
mode, way, gain, reason = pick_step(probe["variants"], sys.argv[1] == "1")
scale = probe_scale(probe, variant_name(mode, way), sys.argv[2])
if scale is not None:     # the estimates scaled by the probe's own time, not the ratio
    reason += f"; estimates / {scale:.2f} (the probe's step against cell_costs' model)"
print(f"{mode}|{way}|{gain if scale is None else scale:.3f}|{reason}")
PYEOF
}
if [ "$STEP" = auto ]; then
  IFS='|' read -r CONV STEP SPEEDUP STEP_NOTE <<<"$(probe_step)"
  STEP_NOTE="step probe ($(( SECONDS - START )) s): $STEP_NOTE"
  echo "$STEP_NOTE"
  set_plan $(( BUDGET - (SECONDS - START) ))
fi
echo "card $CARD$CARD_NOTE, $PLAN_NOTE at a time"
SYNTH_STEP=${GPU_CELLS_SYNTH_COMPILE:-$([ "${GPU_CELLS_DEVICE:-cuda}" = cpu ] && echo none \
  || echo cudagraph)}
run_one() {   # name left: run one cell, leave "STATE|seconds|last line" in runs/cells/NAME.status
  local name=$1 left=$2 t0=$SECONDS limit=() rc state
  local stop=$(( left > 2 * MARGIN ? left - MARGIN : left / 2 ))
  local stop2=$(( left > 2 * T2_MARGIN ? left - T2_MARGIN : left / 2 ))
  case "$name" in
    t1-cifar*|cpu-t1-*|tiny-t1-*) limit=(--time-limit "$stop" --compile "$STEP"
                                   ${CONV:+--conv-mode "$CONV"}) ;;
    permute-copy*|multihead*|tiny-synthetic*|tiny-multihead*|cpu-multihead*)
      limit=(--time-limit "$stop" --compile "$SYNTH_STEP") ;;
    t2-*|tiny-t2-*) limit=(--time-limit "$stop2") ;;
  esac
  # a cell still running after SIGTERM's grace (it writes its record then) is killed
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} timeout -k 20 "$left" $ATTN cells run "$name" \
    --data-root "$DATA" --device "${GPU_CELLS_DEVICE:-cuda}" "${limit[@]}" \
    >"runs/cells/$name.log" 2>&1
  rc=$?
  case $rc in 0) state=DONE ;; 124|137) state=TIMEOUT ;; *) state="FAIL($rc)" ;; esac
  echo "$state|$(( SECONDS - t0 )) s|$(tail -n 1 "runs/cells/$name.log" | cut -c1-90 | tr '|' '/')" \
    >"runs/cells/$name.status"
  if [ -n "${OUT:-}" ]; then   # its records under $OUT at once: they come back even if the
    mkdir -p "$OUT/cells"      # machine ends the job later (a .name while being copied)
    for f in $(written "$name"); do
      cp "$f" "$OUT/cells/.${f##*/}" && mv "$OUT/cells/.${f##*/}" "$OUT/cells/${f##*/}"
    done
  fi
}
DMON=""                      # the card's load while the cells run, every 5 s (SM and memory
if [ -n "${OUT:-}" ] && [ "${GPU_CELLS_DEVICE:-cuda}" != cpu ] \
    && command -v nvidia-smi >/dev/null 2>&1; then   # %): is there room for more at once?
  DMON=$( (nvidia-smi dmon -s u -d 5 >"$OUT/gpu_dmon.txt" 2>&1 & echo $!) )  # not a job
fi
records_now() {   # each record in results/cells: its name, modification time and size
  find results/cells -maxdepth 1 -name '*.json' -printf '%f %T@ %s\n' 2>/dev/null
}
BEFORE=$(records_now)
written() {   # the records of cell $1 (whole, or its parts $1@K) this job wrote or changed
  local f
  for f in "results/cells/$1.json" "results/cells/$1"@*.json; do
    [ -f "$f" ] && ! grep -qxF -- "$(find "$f" -printf '%f %T@ %s\n')" <<<"$BEFORE" \
      && echo "$f"
  done
}
NAMES=()
while read -r name folder minutes secs; do
  left=$(( BUDGET - (SECONDS - START) ))
  NAMES+=("$name")
  rm -f "runs/cells/$name.status"
  while [ "$(jobs -rp | wc -l)" -ge "$N" ]; do wait -n; done
  left=$(( BUDGET - (SECONDS - START) ))
  if [ "$left" -lt 20 ]; then
    echo "SKIP|-|budget spent" >"runs/cells/$name.status"; continue
  fi
  if [ "$started" -ge "$N" ] && [ "$FORCE" = 0 ] && [ "$secs" -gt "$left" ]; then
    echo "SKIP|-|estimate ${secs} s (beside the others) is over the ${left} s left" >"runs/cells/$name.status"
    continue
  fi
  if [ "$started" -ge "$N" ] && [ "$left" -lt "$MIN_START" ]; then
    echo "SKIP|-|only ${left} s left (a later cell needs ${MIN_START})" >"runs/cells/$name.status"
    continue
  fi
  started=$(( started + 1 ))
  echo "start $name ($left s left)"
  run_one "$name" "$left" </dev/null &
done <<<"$PLAN"
wait
[ -n "$DMON" ] && kill "$DMON" 2>/dev/null
WROTE=()                            # the records this job wrote or changed (not the store's)
for name in "${NAMES[@]}"; do
  row=$(cat "runs/cells/$name.status" 2>/dev/null || echo "FAIL(?)|-|no status")
  case "$row" in DONE*|SKIP*) ;; *) FAILED=1 ;; esac
  for f in $(written "$name"); do WROTE+=("$(basename "$f" .json)"); done
  ROWS+=("$name|$row")
done

SUMMARY=$( {
  ON=$([ "${GPU_CELLS_DEVICE:-cuda}" = cpu ] || nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  echo "## gpu_cells on ${ON:-the CPU}, card estimates $CARD (total $(( SECONDS - START )) s)"
  echo
  [ -n "$STEP_NOTE" ] && { echo "$STEP_NOTE"; echo; }
  echo "$PLAN_NOTE at a time"; echo
  [ -n "$DATA_NOTE" ] && { echo "$DATA_NOTE"; echo; }
  echo "| cell | status | time | last line |"
  echo "|---|---|---|---|"
  for row in "${ROWS[@]}"; do IFS='|' read -r a b c d <<<"$row"; echo "| $a | $b | $c | $d |"; done
  # what this job wrote, as `attn-dyn cells report` tables it
  echo
  if [ "${#WROTE[@]}" = 0 ]; then echo "(no record written)"
  else
    $PY - "${WROTE[@]}" <<'PYEOF' 2>&1 || echo "(the records of this job could not be tabled)"
import sys
from minimal_attn.experiments import results_store, results_tables
wrote = set(sys.argv[1:])
print(results_tables.render([r for r in results_store.read_cells("results")
                             if r["cell"] in wrote]))
PYEOF
  fi
} )
echo "$SUMMARY"
if [ -n "${OUT:-}" ]; then
  echo "$SUMMARY" >"$OUT/gpu_cells_summary.md"
  # only the records this job wrote: another record of the store, packed as it was at
  # --prepare, would come home older than one rerun or imported there since
  if [ "${#WROTE[@]}" -gt 0 ]; then
    printf 'results/cells/%s.json\n' "${WROTE[@]}" | sort -u | tar czf "$OUT/cells_results.tar.gz" -T -
  fi
  # the small files of this job's run folders (curves, settings, per-seed results; no
  # checkpoints), for `cells plot` at home: tar xzf cells_runs.tar.gz
  RUN_FILES=()
  for name in "${NAMES[@]}"; do
    for f in history.jsonl config.json results.json summary.md; do
      [ -f "runs/cells/$name/$f" ] && RUN_FILES+=("runs/cells/$name/$f")
    done
  done
  [ "${#RUN_FILES[@]}" -gt 0 ] && tar czf "$OUT/cells_runs.tar.gz" "${RUN_FILES[@]}"
  tail -n 40 runs/cells/*.log >"$OUT/gpu_cells_logs.txt" 2>/dev/null
  [ -f runs/cells/step_probe.json ] && cp runs/cells/step_probe.json "$OUT/"
fi
exit $FAILED

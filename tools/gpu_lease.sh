#!/usr/bin/env bash
# One prepared command on a lent GPU machine (docs/testing.md, "On a GPU machine"): install the carried
# wheelhouse, once per machine the lease's checks (nvidia-smi, env, the image's versions, the CUDA-marked
# tests, the timer against torch's Timer and do_bench), then for what is left of BUDGET seconds (default 540:
# 9 minutes) STEP: "guide" (default: params/hf-guide.yaml, resumed from reports/hf-guide-h200), "diagnose"
# (the remedies of that study's slower cells, docs/diagnosis.md), "gpu-check" or "oom" (params/gpu-check.yaml,
# params/guide-oom-16gb.yaml, from their -h200 folders), or "experiments" (issue 47: params/anchors.yaml into
# anchors-h200, then tools/lease_experiments.py: why the host changes regime;
# LEASE_EXPERIMENTS_ARGS adds its options, e.g. "--regime-plan warm,warm,study --skip compile-alone").
#
# What the device tool taught the second lease: it brings back only a few files per command (so the study leaves
# as ONE archive, $OUT/<step>-<start>-<pid>.tgz), and it copies the working tree afresh before every command (so
# the study is measured in /tmp/study/<name>, which a warm machine keeps: a second command resumes from the first
# one's records, not from the committed ones). Nothing runs beside a timed window: the archive is packed between
# steps and at the end, never while a kernel measures, and every step is bounded by a timeout of its own (the run
# stops at its --time-limit; `timeout` ends it a little later if it hangs), so the script reaches its end, and packs,
# before the device tool's limit.
#
# Compile caches travel between leases (docs/testing.md, "Compile caches"): the kept caches of every study are
# under $T/compile-caches (BENCH_UTILS_COMPILE_CACHES); a carried .compile-caches/ folder (the earlier leases' cold
# compiles) is copied in first, and this command's cold.json and artifacts.bin files leave in
# $OUT/caches-<start>-<pid>.tgz (split into 15 MiB parts where larger).
#
#   run: bash tools/gpu_lease.sh 540 [STEP]   carry: [".whl", ".source-commit.json", ".compile-caches"]
#   kind: nvidia-h200
#   here, after: python tools/bring_back.py <files_at>/<step>-*.tgz reports/<study> --lease lease-<date>
#                python tools/bring_back.py --caches <files_at>/caches-*  (into .compile-caches/)
set -u
BUDGET=${1:-540}
STEP=${2:-guide}
case "$STEP" in
  guide|diagnose) NAME=hf-guide-h200; GRID=params/hf-guide.yaml ;;
  gpu-check) NAME=gpu-check-h200; GRID=params/gpu-check.yaml ;;
  oom) NAME=guide-oom-16gb-h200; GRID=params/guide-oom-16gb.yaml ;;
  experiments) NAME=anchors-h200; GRID=params/anchors.yaml ;;
  *) echo "unknown step $STEP: guide, diagnose, gpu-check, oom or experiments" >&2; exit 2 ;;
esac
START=$(date +%s)
TAG=$START-$$  # names this command's archive and logs
: "${OUT:?OUT is the folder the device tool brings back}"
T=${GPU_LEASE_TMP:-/tmp}  # what a warm machine keeps between commands (a test points it elsewhere)
LEASE=$T/lease
STUDY=$T/study/$NAME
mkdir -p "$LEASE" "$T/study"
CACHES=$T/compile-caches
mkdir -p "$CACHES"
[ -d .compile-caches ] && cp -rn .compile-caches/. "$CACHES/"  # the earlier leases' cold compiles, where carried
export BENCH_UTILS_COMPILE_CACHES=$CACHES
# Pack the lease's files and the study (the records, logs, notebooks; not the committed pages) into one archive,
# and the kept caches' portable files into another: between steps and on any exit. Written under another name and
# renamed, so that $OUT never holds half an archive.
pack() {
  tar czf "$OUT/.packing-$$" -C "$T" --exclude="$NAME/en" --exclude="$NAME/ar" --exclude="$NAME/es" \
    --exclude="$NAME/.runner.lock" lease "study/$NAME" 2>/dev/null && mv -f "$OUT/.packing-$$" "$OUT/$STEP-$TAG.tgz"
  (cd "$CACHES" && find . \( -name cold.json -o -name artifacts.bin \) -print0 | tar czf "$OUT/.packing-$$" --null -T - \
    2>/dev/null) && rm -f "$OUT"/caches-"$TAG".tgz* \
    && if [ "$(stat -c %s "$OUT/.packing-$$")" -gt 15728640 ]; then
         split -b 15M "$OUT/.packing-$$" "$OUT/caches-$TAG.tgz.part-" && rm -f "$OUT/.packing-$$"
       else mv -f "$OUT/.packing-$$" "$OUT/caches-$TAG.tgz"; fi
}
trap 'pack; rm -f "$OUT"/.packing-*; ls -l "$OUT"' EXIT
trap 'exit 143' TERM INT
if [ ! -d "$STUDY" ] && [ "$STEP" = experiments ]; then
  # every lease measures its own anchors: copied in, the committed ones (the same image, the same record keys) would
  # be resumed, and a later lease would measure none; bring_back.py appends this lease's records to them
  mkdir -p "$STUDY"
elif [ ! -d "$STUDY" ]; then
  cp -r "reports/$NAME" "$STUDY" 2>/dev/null || mkdir -p "$STUDY"
fi
if [ ! -d "$T/site" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$T/site" .whl/*.whl || exit 1
fi
export PYTHONPATH=$T/site:$PWD PATH=$T/site/bin:$PATH
python3 -m ipykernel install --prefix "$T/kern" --name bench-utils >/dev/null 2>&1 && export JUPYTER_PATH=$T/kern/share/jupyter
if [ ! -f "$LEASE/checks-done" ]; then
  nvidia-smi > "$LEASE/nvidia-smi.txt" 2>&1
  PYTHONPATH= python3 -m pip freeze > "$LEASE/image-freeze.txt" 2>&1
  python3 -m bench_utils env > "$LEASE/env.txt" 2>&1
  timeout 240 python3 -m pytest -q -p no:cacheprovider -m cuda tests/measurement tests/variants tests/study \
    > "$LEASE/cuda-tests.txt" 2>&1
  timeout 120 python3 -m bench_utils validate-timer --device cuda --out "$LEASE/timer_check.json" \
    > "$LEASE/timer.txt" 2>&1
  touch "$LEASE/checks-done"
  CHECKED=1
fi
# the lease's checks into the study folder: the ones just run replace the committed ones; a study a later command
# measures first (the anchors) gets those an earlier command ran
if [ -n "${CHECKED:-}" ] || [ ! -f "$STUDY/timer_check.json" ]; then cp "$LEASE/timer_check.json" "$STUDY/" 2>/dev/null; fi
pack
MIN_STEP=${GPU_LEASE_MIN_STEP_S:-60}  # a step with less left than this is not started
LEFT=$(( BUDGET - ($(date +%s) - START) - 30 ))  # 30 s for the dry run and the archive
# a step past its limit (a hang): ended by SIGTERM 15 s after, then SIGKILL, and the script still packs; in the
# script's process group (--foreground), so that a stop of the command reaches it at once
bounded() { timeout --foreground --kill-after=10 "$(( $1 + 15 ))" "${@:2}"; }
LOG="$LEASE/$STEP-$TAG.log"
if [ "$LEFT" -gt "$MIN_STEP" ] && [ "$STEP" = diagnose ]; then
  bounded "$LEFT" python3 -m bench_utils diagnose "$STUDY" --time-limit "${LEFT}s" > "$LOG" 2>&1
  echo "diagnose exit $?" >> "$LOG"
elif [ "$LEFT" -gt "$MIN_STEP" ] && [ "$STEP" = experiments ]; then
  # the anchors first (a resumed command finds them measured), then the experiments for the rest of the time
  ANCHORS=$(( LEFT < 150 ? LEFT : 150 ))
  bounded "$ANCHORS" python3 -m bench_utils run "$GRID" --out "$STUDY" --time-limit "${ANCHORS}s" > "$LOG" 2>&1
  echo "anchors exit $?" >> "$LOG"
  pack
  LEFT=$(( BUDGET - ($(date +%s) - START) - 30 ))
  bounded "$LEFT" env PYTHONUNBUFFERED=1 python3 tools/lease_experiments.py run --out "$LEASE/experiments" \
    --scratch "$T/scratch" --deadline-s "$LEFT" ${LEASE_EXPERIMENTS_ARGS:-} >> "$LOG" 2>&1
  echo "experiments exit $?" >> "$LOG"
elif [ "$LEFT" -gt "$MIN_STEP" ]; then
  bounded "$LEFT" python3 -m bench_utils run "$GRID" --out "$STUDY" --time-limit "${LEFT}s" > "$LOG" 2>&1
  echo "run exit $?" >> "$LOG"
fi
tail -4 "$LOG" 2>/dev/null
python3 -m bench_utils run "$GRID" --out "$STUDY" --dry-run --device-model H200 > "$LEASE/left-$TAG.txt" 2>&1
tail -3 "$LEASE/left-$TAG.txt"

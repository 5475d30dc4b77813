#!/usr/bin/env bash
# One prepared command on a lent GPU machine (docs/testing.md, "On a GPU machine"): install the carried
# wheelhouse, once per machine the lease's checks (nvidia-smi, env, the image's versions, the CUDA-marked
# tests, the timer against torch's Timer and do_bench), then for what is left of BUDGET seconds (default 540:
# 9 minutes) STEP: "guide" (default: params/hf-guide.yaml into reports/hf-guide-h200, resumed from the
# committed records), "diagnose" (the remedies of that study's slower cells, docs/diagnosis.md), "gpu-check"
# or "oom" (params/gpu-check.yaml, params/guide-oom-16gb.yaml into their -h200 folders); everything under $OUT.
# Run it again at once while the machine is warm (its /tmp keeps the install and the checks).
#
#   run: bash tools/gpu_lease.sh 540 [STEP]   carry: [".whl", ".source-commit.json"]   kind: nvidia-h200
#   here, after: python tools/bring_back.py <files_at>/hf-guide-h200 reports/hf-guide-h200 --study-folder "$PWD"
set -u
BUDGET=${1:-540}
STEP=${2:-guide}
case "$STEP" in
  guide|diagnose) STUDY=reports/hf-guide-h200; GRID=params/hf-guide.yaml ;;
  gpu-check) STUDY=reports/gpu-check-h200; GRID=params/gpu-check.yaml ;;
  oom) STUDY=reports/guide-oom-16gb-h200; GRID=params/guide-oom-16gb.yaml ;;
  *) echo "unknown step $STEP: guide, diagnose, gpu-check or oom" >&2; exit 2 ;;
esac
START=$(date +%s)
: "${OUT:?OUT is the folder the device tool brings back}"
mkdir -p "$OUT/lease"
if [ ! -d /tmp/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
python3 -m ipykernel install --prefix /tmp/kern --name bench-utils >/dev/null && export JUPYTER_PATH=/tmp/kern/share/jupyter
if [ ! -f /tmp/lease-checks-done ]; then
  nvidia-smi > "$OUT/lease/nvidia-smi.txt" 2>&1
  PYTHONPATH= python3 -m pip freeze > "$OUT/lease/image-freeze.txt" 2>&1
  python3 -m bench_utils env > "$OUT/lease/env.txt" 2>&1
  timeout 240 python3 -m pytest -q -p no:cacheprovider -m cuda tests/measurement tests/variants tests/study \
    > "$OUT/lease/cuda-tests.txt" 2>&1
  timeout 120 python3 -m bench_utils validate-timer --device cuda --out "$STUDY/timer_check.json" \
    > "$OUT/lease/timer.txt" 2>&1
  touch /tmp/lease-checks-done
fi
LEFT=$(( BUDGET - ($(date +%s) - START) - 30 ))  # 30 s for the copy back
if [ "$LEFT" -gt 60 ] && [ "$STEP" = diagnose ]; then
  python3 -m bench_utils diagnose "$STUDY" --time-limit "${LEFT}s" > "$OUT/lease/$STEP-$START.log" 2>&1
  echo "diagnose exit $?" >> "$OUT/lease/$STEP-$START.log"
elif [ "$LEFT" -gt 60 ]; then
  python3 -m bench_utils run "$GRID" --out "$STUDY" --time-limit "${LEFT}s" > "$OUT/lease/$STEP-$START.log" 2>&1
  echo "run exit $?" >> "$OUT/lease/$STEP-$START.log"
fi
python3 -m bench_utils run "$GRID" --out "$STUDY" --dry-run --device-model H200 > "$OUT/lease/left-$START.txt" 2>&1
cp -r "$STUDY" "$OUT/"

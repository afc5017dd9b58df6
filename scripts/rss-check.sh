#!/usr/bin/env bash
# A long run's memory stays flat (issue 17): trains a small Fashion-MNIST
# subset for many epochs and reads timm-run's resident set size (VmRSS) as
# each epoch's first batch is logged. The first epochs fill the caches (the
# allocator's, the decoded dataset, the checkpoint buffers), so the baseline
# is the RSS at the start of epoch BASE; the check fails when any later
# reading, or the last one before exit, is more than LIMIT percent above it.
#
# Usage: rss-check.sh [EPOCHS [BASE [LIMIT]]] [-- TIMM-RUN ARGS...]
#   defaults: 20 epochs, baseline at epoch 2, limit 5 (percent).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

epochs=20 base=2 limit=5
positional=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do positional+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#positional[@]} -ge 1 ] && epochs=${positional[0]}
[ ${#positional[@]} -ge 2 ] && base=${positional[1]}
[ ${#positional[@]} -ge 3 ] && limit=${positional[2]}
for value in "$epochs" "$base" "$limit"; do
  [[ $value =~ ^[0-9]+$ ]] || { echo "rss-check.sh: expected whole numbers EPOCHS BASE LIMIT, got '$value'" >&2; exit 2; }
done
if [ "$base" -ge "$epochs" ]; then
  echo "rss-check.sh: the baseline epoch ($base) must come before the last epoch ($((epochs - 1)))" >&2
  exit 2
fi

"$TIMM_CPP_ROOT/scripts/setup.sh" timm_runtime
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkfifo "$work/log"

"$TIMM_CPP_BUILD/bin/timm-run" --model resnet18 --epochs "$epochs" --train-num-samples 1024 \
  --val-num-samples 512 -b 64 --lr 0.1 --warmup-epochs 0 --no-aug -j 2 --log-interval 1000 \
  --output "$work" --experiment rss "$@" >"$work/log" 2>&1 &
pid=$!

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0; }
mib() { awk -v kib="$1" 'BEGIN { printf "%.1f", kib / 1024 }'; }

epoch=-1 baseline=0 worst=0 worst_epoch=-1 last=0
printf '%6s %10s\n' epoch "RSS MiB"
while IFS= read -r line; do
  # "Train: E [   0/16 (  6%)]": epoch E's first batch.
  if [[ $line =~ ^Train:\ ([0-9]+)\ \[\ *0/ ]]; then
    epoch=${BASH_REMATCH[1]}
    last=$(rss_kib)
    printf '%6d %10s\n' "$epoch" "$(mib "$last")"
    if [ "$epoch" -eq "$base" ]; then baseline=$last; fi
    if [ "$epoch" -gt "$base" ] && [ "$last" -gt "$worst" ]; then worst=$last worst_epoch=$epoch; fi
  elif [[ $line == "*** Best metric"* ]]; then
    last=$(rss_kib)  # after the last epoch's evaluation and checkpoint
    printf '%6s %10s\n' end "$(mib "$last")"
    if [ "$last" -gt "$worst" ]; then worst=$last worst_epoch=end; fi
  fi
done <"$work/log"
status=0
wait "$pid" || status=$?
if [ "$status" -ne 0 ]; then
  echo "rss-check.sh: timm-run exited with $status" >&2
  exit 1
fi
if [ "$baseline" -eq 0 ]; then
  echo "rss-check.sh: no reading at epoch $base: timm-run's log had no 'Train: $base [   0/' line" >&2
  exit 1
fi
growth=$(awk -v a="$baseline" -v b="$worst" 'BEGIN { printf "%+.2f", 100 * (b - a) / a }')
echo "baseline (epoch $base) $(mib "$baseline") MiB, highest after it $(mib "$worst") MiB (epoch $worst_epoch):" \
  "$growth%, limit $limit%"
if awk -v g="$growth" -v l="$limit" 'BEGIN { exit !(g > l) }'; then
  echo "rss-check.sh: RSS grew by more than $limit% over $epochs epochs" >&2
  exit 1
fi

#!/usr/bin/env bash
# The main job: set up, then train resnet18 on the built-in Fashion-MNIST
# (60,000 training images at 28x28) for one epoch and print test top-1 on the
# 10,000 test images. Extra arguments go to timm-run and override the recipe
# (e.g. --epochs 5, --model resnet50).
#
# The recipe differs from timm's ImageNet defaults where one epoch on 28x28
# images needs it: no warmup (timm's 5 warmup epochs would spend the whole run
# at 1e-5), the cosine schedule stepped per update, and no random-resized-crop
# or colour jitter (at 28 pixels they cost several points in one epoch).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$TIMM_CPP_ROOT/scripts/setup.sh" timm_runtime  # timm-run and the plugins, not the tests
recipe=(--model resnet18 --epochs 1 -b 64 --lr 0.1 --warmup-epochs 0 --sched-on-updates --no-aug -j 2
        --log-interval 100 --output "$TIMM_CPP_ROOT/output/train")
echo "timm-run ${recipe[*]} $*" >&2
exec "$TIMM_CPP_BUILD/bin/timm-run" "${recipe[@]}" "$@"

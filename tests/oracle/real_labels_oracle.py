"""Python oracle for test_real_labels: timm's RealLabelsImagenet (validate.py --real-labels).

Usage: real_labels_oracle.py OUT_DIR
    Draws (seeded) the reassessed labels of 40 validation images (0 to 3 classes each of 12,
    some empty), writes them as OUT_DIR/real.json (entry i for ILSVRC2012_val_<i + 1>.JPEG),
    and logits (40, 12) as OUT_DIR/logits.safetensors ("logits"), the rows in the order of a
    shuffled list of the images' file names (some with folders in front). timm's
    RealLabelsImagenet takes the logits in batches of 16; prints {"filenames": [...],
    "batch": 16, "top1": ..., "top5": ...}.
"""
import json
import os
import random
import sys

import torch
from safetensors.torch import save_file
from timm.data import RealLabelsImagenet

COUNT, CLASSES, BATCH = 40, 12, 16


def main():
    out_dir = sys.argv[1]
    rng = random.Random(0)
    real = [sorted(rng.sample(range(CLASSES), rng.choice([0, 1, 1, 2, 3]))) for _ in range(COUNT)]
    with open(os.path.join(out_dir, 'real.json'), 'w') as f:
        json.dump(real, f)
    names = [f'ILSVRC2012_val_{i + 1:08d}.JPEG' for i in range(COUNT)]
    rng.shuffle(names)
    filenames = [(f'n{i % 3:08d}/' if i % 2 else '') + n for i, n in enumerate(names)]
    logits = torch.randn(COUNT, CLASSES, generator=torch.Generator().manual_seed(0))
    save_file({'logits': logits}, os.path.join(out_dir, 'logits.safetensors'))
    real_labels = RealLabelsImagenet(filenames, real_json=os.path.join(out_dir, 'real.json'))
    for i in range(0, COUNT, BATCH):
        real_labels.add_result(logits[i:i + BATCH])
    print(json.dumps({'filenames': filenames, 'batch': BATCH, 'top1': real_labels.get_accuracy(k=1),
                      'top5': real_labels.get_accuracy(k=5)}))


if __name__ == '__main__':
    main()

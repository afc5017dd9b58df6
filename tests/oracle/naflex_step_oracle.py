"""Python oracle for test_naflex_run: one NaFlex training step as train.py takes it, on the
first Fashion-MNIST training images.

Usage: naflex_step_oracle.py OUT_DIR [channels_first]
    Writes OUT_DIR/init.safetensors: timm's naflexvit_base_patch16_gap (embed_dim 32, depth 1,
    num_heads 2, in_chans 1, 10 classes) with model_parity.perturb's random norms, biases and
    tokens. Then train.py's NaFlex path: create_naflex_loader over the first 8 images
    (--naflex-train-seq-lens 16, -b 12: a budget of 192 tokens, one batch of 8; --no-aug:
    ResizeToSequence, bicubic; mean 0.5, std 0.25), CrossEntropyLoss (--smoothing 0),
    create_optimizer_v2 sgd (lr 0.1, momentum 0.9, weight decay 0), the loss times
    --naflex-loss-scale linear's B / 12, one step. Writes OUT_DIR/after.safetensors (the
    weights after it) and prints {"loss": the batch's loss, "batch": B}.

    channels_first: train.py's --naflex-patchify-channels-first with a model made for it
    (patchify_channels_last=False): the images as RGB (--input-img-mode RGB), in_chans 3,
    mean (0.5, 0.4, 0.3), std (0.25, 0.2, 0.3), each patch (C, Ph, Pw) flat.
"""
import contextlib
import gzip
import io
import json
import os
import sys

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file

import timm
from timm.data import create_naflex_loader
from timm.optim import create_optimizer_v2

import model_parity
from data_oracle import FMNIST, fmnist_images

COUNT = 8
BATCH_SIZE = 12


class FirstImages(torch.utils.data.Dataset):
    """The first Fashion-MNIST training images and labels, as timm-run's --train-num-samples takes them."""

    def __len__(self):
        return COUNT

    def __init__(self, mode):
        self.mode = mode
        self.images = fmnist_images('train', COUNT)
        with gzip.open(os.path.join(FMNIST, 'train-labels-idx1-ubyte.gz'), 'rb') as f:
            self.labels = np.frombuffer(f.read(), dtype=np.uint8)[8:8 + COUNT]

    def __getitem__(self, i):
        return Image.fromarray(self.images[i], 'L').convert(self.mode), int(self.labels[i])


def state(model):
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def main():
    torch.set_num_threads(1)
    out_dir = sys.argv[1]
    channels_first = len(sys.argv) > 2 and sys.argv[2] == 'channels_first'
    chans = 3 if channels_first else 1
    mean, std = ((0.5, 0.4, 0.3), (0.25, 0.2, 0.3)) if channels_first else ((0.5,), (0.25,))
    torch.manual_seed(0)
    model = timm.create_model('naflexvit_base_patch16_gap', num_classes=10, in_chans=chans, embed_dim=32, depth=1,
                              num_heads=2, patchify_channels_last=not channels_first)
    model_parity.perturb(model, torch.Generator().manual_seed(1))
    save_file(state(model), os.path.join(out_dir, 'init.safetensors'))
    # The wrapper prints its schedule's size; the output carries only the JSON.
    with contextlib.redirect_stdout(io.StringIO()):
        loader = create_naflex_loader(FirstImages('RGB' if channels_first else 'L'), patch_size=16,
                                      train_seq_lens=(16,), batch_size=BATCH_SIZE, is_training=True, no_aug=True,
                                      interpolation='bicubic', mean=mean, std=std, channels=chans, num_workers=0,
                                      device=torch.device('cpu'), pin_memory=False,
                                      patchify_channels_last=not channels_first)
        (batch, target), = list(loader)  # one batch
    optimizer = create_optimizer_v2(model, opt='sgd', lr=0.1, weight_decay=0.0, momentum=0.9)
    model.train()
    b = batch['patches'].shape[0]
    loss = torch.nn.CrossEntropyLoss()(model(batch), target)
    (loss * (b / BATCH_SIZE)).backward()
    optimizer.step()
    save_file(state(model), os.path.join(out_dir, 'after.safetensors'))
    print(json.dumps({'loss': loss.item(), 'batch': b}))


if __name__ == '__main__':
    main()

"""Test oracle for the wds/ dataset: writes WebDataset shards and lists the
order in which timm 1.0.31's ReaderWds (webdataset 1.0.2) streams them.

Usage: wds_oracle.py <outdir>
Writes:
  <outdir>/ds/ds-000{0..4}.tar   five shards of small PNG and JPEG samples, each
                                 with .cls and a .json sidecar ({"key", "label2",
                                 "alt"}); one sample has no image, one an alt of -1
  <outdir>/ds/_info.json         splits train (all shards), validation (3, 4),
                                 alt (0, 1, alt_label 'alt')
  <outdir>/ds/classes.txt        a class map by source index (3 1 0 2 4)
  <outdir>/cases.txt             one case a line:
      <name>\t<split>\t<training>\t<world>\t<rank>\t<workers>\t<batch>\t<epoch>\t<target_key>\t<class_map>
  <outdir>/<name>.txt            that case's stream as the loader yields it: one
                                 line per batch, "<key>:<target> <key>:<target> ..."
  <outdir>/pixels/<key>.raw      PIL's RGB pixels of some samples, "<key> <h> <w>"
                                 in <outdir>/pixels.txt
  <outdir>/braces.txt            "<pattern>\t<name>|<name>|..." (braceexpand)

The per-worker sample shuffle is seeded as timm-cpp documents it:
random.Random(seed + 65536 * epoch + global_worker_id + 1) (timm uses torch's
worker seed); everything else is timm's own code.
"""
import json
import os
import sys
import tarfile

import numpy as np

from timm.data.readers.reader_wds import ReaderWds
from webdataset.shardlists import expand_urls

sys.path.insert(0, os.path.dirname(__file__))
from tar_oracle import add, encode  # noqa: E402

SEED = 42
SHARD_SIZES = [7, 5, 6, 4, 8]


def build(root):
    os.makedirs(root, exist_ok=True)
    rng = np.random.RandomState(0)
    names = []
    for s, n in enumerate(SHARD_SIZES):
        name = f'ds-{s:04d}.tar'
        names.append(name)
        with tarfile.open(os.path.join(root, name), 'w', format=tarfile.GNU_FORMAT) as tf:
            for i in range(n):
                key = f's{s}_{i:03d}'
                target = (s * 7 + i) % 5
                img = rng.randint(0, 256, size=(6 + i % 3, 5 + s % 2, 3), dtype=np.uint8)
                if not (s == 1 and i == 2):  # a sample without an image
                    if i % 2:
                        add(tf, key + '.jpg', encode(img, 'JPEG'))
                    else:
                        add(tf, key + '.png', encode(img, 'PNG'))
                add(tf, key + '.cls', str(target).encode())
                meta = {'key': key, 'label2': (target + 1) % 5, 'alt': -1 if (s == 0 and i == 4) else target}
                add(tf, key + '.json', json.dumps(meta).encode())
    info = {'name': 'ds', 'splits': {
        'train': {'name': 'train', 'num_samples': sum(SHARD_SIZES) - 1, 'filenames': names,
                  'shard_lengths': SHARD_SIZES},
        'validation': {'name': 'validation', 'num_samples': SHARD_SIZES[3] + SHARD_SIZES[4],
                       'filenames': names[3:], 'shard_lengths': SHARD_SIZES[3:]},
        'alt': {'name': 'alt', 'num_samples': SHARD_SIZES[0] + SHARD_SIZES[1] - 1, 'filenames': names[:2],
                'shard_lengths': SHARD_SIZES[:2], 'alt_label': 'alt'},
    }}
    with open(os.path.join(root, '_info.json'), 'w') as f:
        json.dump(info, f)
    with open(os.path.join(root, 'classes.txt'), 'w') as f:
        f.write('3\n1\n0\n2\n4\n')


def worker_stream(root, split, training, world, rank, workers, worker, batch, epoch, target_key, class_map):
    reader = ReaderWds(root, split=split, is_training=training, batch_size=batch, seed=SEED,
                       target_key=target_key or None, class_map=class_map)
    reader.dist_rank = rank
    reader.dist_num_replicas = world
    reader.set_loader_cfg(num_workers=workers)
    reader.worker_id = worker
    reader.num_workers = max(1, workers)
    global_worker = rank * reader.num_workers + worker
    reader.worker_seed = SEED + 65536 * epoch + global_worker + 1
    reader.set_epoch(epoch)
    reader._lazy_init()
    num = reader._num_samples_per_worker()
    ds = reader.ds.with_epoch(num) if (training or world > 1) else reader.ds
    out = []
    for sample in ds:
        target = sample['target']
        if reader.remap_class:
            target = reader.class_to_idx[target]
        out.append((json.loads(sample['json'])['key'], target, sample['image']))
    return out, len(reader)


def loader_batches(streams, batch):
    """torch's DataLoader over an IterableDataset: each worker's own batches,
    taken in turn, a finished worker passed over."""
    per_worker = [[s[i:i + batch] for i in range(0, len(s), batch)] for s in streams]
    out = []
    r = 0
    while any(r < len(b) for b in per_worker):
        for b in per_worker:
            if r < len(b):
                out.append(b[r])
        r += 1
    return out


def main(outdir):
    root = os.path.join(outdir, 'ds')
    build(root)
    class_map = {3: 0, 1: 1, 0: 2, 2: 3, 4: 4}
    cases = []
    for world in (1, 2):
        for rank in range(world):
            for workers in (0, 2):
                cases.append((f'eval_w{world}_r{rank}_j{workers}', 'train', 0, world, rank, workers, 4, 0, '', ''))
                for epoch in (0, 1):
                    cases.append((f'train_w{world}_r{rank}_j{workers}_e{epoch}', 'train', 1, world, rank, workers, 4,
                                  epoch, '', ''))
    cases.append(('val_w1', 'validation', 0, 1, 0, 0, 3, 0, '', ''))
    cases.append(('alt_w1', 'alt', 0, 1, 0, 0, 4, 0, '', ''))
    cases.append(('target_key', 'train', 0, 1, 0, 0, 4, 0, 'label2', ''))
    cases.append(('class_map', 'train', 0, 1, 0, 2, 4, 0, '', 'classes.txt'))
    cases.append(('brace_eval', 'ds-{0001..0003}.tar|12', 0, 1, 0, 0, 4, 0, '', ''))
    cases.append(('brace_train', 'ds-{0001..0003}.tar|12', 1, 1, 0, 2, 2, 1, '', ''))
    os.makedirs(os.path.join(outdir, 'pixels'), exist_ok=True)
    pixels = []
    with open(os.path.join(outdir, 'cases.txt'), 'w') as f:
        for case in cases:
            name, split, training, world, rank, workers, batch, epoch, target_key, cmap = case
            streams = []
            for w in range(max(1, workers)):
                stream, _ = worker_stream(root, split, bool(training), world, rank, workers, w, batch, epoch,
                                          target_key, class_map if cmap else None)
                streams.append(stream)
            batches = loader_batches(streams, batch)
            with open(os.path.join(outdir, name + '.txt'), 'w') as g:
                for b in batches:
                    g.write(' '.join(f'{k}:{t}' for k, t, _ in b) + '\n')
            if name == 'eval_w1_r0_j0':
                for k, _, img in streams[0][:8]:
                    a = np.asarray(img.convert('RGB'))
                    a.tofile(os.path.join(outdir, 'pixels', k + '.raw'))
                    pixels.append(f'{k} {a.shape[0]} {a.shape[1]}')
            f.write('\t'.join(str(c) for c in case) + '\n')
    with open(os.path.join(outdir, 'pixels.txt'), 'w') as f:
        f.write('\n'.join(pixels) + '\n')
    patterns = ['a-{0000..0003}.tar', 'x{1..10..3}y', '{07..10}', '{3..-1}', 'p{a,b{1,2}}q::r{0..1}',
                r'esc\{1,2\}{a,b}', '{-05..3}', 'no{braces}', 'z{}']
    with open(os.path.join(outdir, 'braces.txt'), 'w') as f:
        for p in patterns:
            f.write(p + '\t' + '|'.join(expand_urls(p)) + '\n')


if __name__ == '__main__':
    main(sys.argv[1])

"""Python timm's side of the tool tests: validate.py's and inference.py's
numbers for a timm-cpp safetensors checkpoint, with timm's own model and eval
transform.

Usage:
  tools_oracle.py validate CKPT --num-samples N -b B [--reparam] [--valid-labels FILE] [--test-pool]
                                 [--crop-border-pixels P] [--metrics-avg A] DATACFG...
                                       (--test-pool: timm's apply_test_time_pool for DATACFG's size, and
                                        then crop_pct 1.0, as validate.py; prints "pooled" too)
  tools_oracle.py save CKPT --model M  (writes timm's M, 10 classes, one channel, seeded, with BatchNorm
                                        statistics and head drawn away from their init, as safetensors)
  tools_oracle.py infer CKPT (--num-samples N | --folder DIR) --topk K DATACFG...
  tools_oracle.py images DIR --num-samples N   (writes N Fashion-MNIST test PNGs into DIR)
  tools_oracle.py valimages DIR --num-samples N (the first N test images as JPEGs named as ImageNet's
                                        validation set, DIR/<label>/ILSVRC2012_val_<i + 1>.JPEG, and their
                                        labels as DIR.json, one single-label entry each: real labels)
  tools_oracle.py scores DIR             (seeded targets and predictions over 12 classes, two of them
                                        never predicted and one only predicted, as DIR/scores.safetensors;
                                        sklearn's precision, recall and f1 with zero_division=0 for each
                                        average: {"micro": [p, r, f1], "macro": ..., "weighted": ...})
  tools_oracle.py decay -                (timm's decay_batch_step for batch sizes 0..1100 at num_intra_steps 1, 2
                                        and 4, no_odd off and on: {"<steps>_<no_odd 0|1>": [...]}, and
                                        check_batch_size_retry of a few errors)
  tools_oracle.py imagenet -             (timm's ImageNetInfo('imagenet-1k'): {"name": [...], "description": [...],
                                        "detailed": [...]} by class index)
  tools_oracle.py parse FILE            (a results file read by Python's csv / json: rows, columns)
  tools_oracle.py svg FILE --csv SUMMARY (the SVG parsed by xml.etree; each curve's points mapped back to
                                         data values and compared with the CSV's: max abs error per series)
DATACFG: --img-size S --interpolation I --mean M --std S --crop-pct C (the
data config timm-cpp logged; timm's create_transform builds the pipeline).
Prints one JSON object.
"""
import argparse
import gzip
import json
import os

import numpy as np
import safetensors.torch
import timm
import torch
import torch.nn.functional as F
from PIL import Image
from timm.data import create_transform
from timm.layers import apply_test_time_pool
from timm.utils import accuracy

FMNIST = '/usr/share/datasets/fashion-mnist'


def fmnist_test(count):
    with gzip.open(os.path.join(FMNIST, 't10k-images-idx3-ubyte.gz'), 'rb') as f:
        images = np.frombuffer(f.read(), dtype=np.uint8)[16:].reshape(-1, 28, 28)[:count]
    with gzip.open(os.path.join(FMNIST, 't10k-labels-idx1-ubyte.gz'), 'rb') as f:
        labels = np.frombuffer(f.read(), dtype=np.uint8)[8:][:count]
    return [Image.fromarray(a, mode='L') for a in images], torch.from_numpy(labels.astype(np.int64))


def folder_images(root):
    names = sorted(n for n in os.listdir(root) if n.lower().endswith(('.png', '.jpg', '.jpeg')))
    return names, [Image.open(os.path.join(root, n)).convert('L') for n in names]


def load_model(args):
    model = timm.create_model(args.model, num_classes=args.num_classes, in_chans=1)
    model.load_state_dict(safetensors.torch.load_file(args.checkpoint), strict=True)
    return model.eval()


def transform(args):
    return create_transform((1, args.img_size, args.img_size), is_training=False, interpolation=args.interpolation,
                            mean=(args.mean,), std=(args.std,), crop_pct=args.crop_pct,
                            crop_border_pixels=args.crop_border_pixels)


def batches(images, t, batch_size):
    for i in range(0, len(images), batch_size):
        yield i, torch.stack([t(im) for im in images[i:i + batch_size]])


def cmd_save(args):
    torch.manual_seed(0)
    model = timm.create_model(args.model, num_classes=args.num_classes, in_chans=1)
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith('running_mean'):
                buf.normal_(0, 0.1)
            elif name.endswith('running_var'):
                buf.uniform_(0.5, 1.5)
        # A confident head: predictions away from near-ties, so rounding cannot flip them.
        model.get_classifier().weight.mul_(100)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(state, args.checkpoint)
    print(json.dumps({'written': len(state)}))


def cmd_validate(args):
    torch.set_num_threads(2)
    model, t = load_model(args), transform(args)
    if args.reparam:
        model = timm.models.reparameterize_model(model)
    pooled = False
    if args.test_pool:
        model, pooled = apply_test_time_pool(model, {'input_size': (1, args.img_size, args.img_size)})
        if pooled:
            args.crop_pct = 1.0
            t = transform(args)
    images, labels = fmnist_test(args.num_samples)
    valid_labels = None
    if args.valid_labels:  # validate.py's: the outputs at those indices, in that order
        with open(args.valid_labels, 'r') as f:
            valid_labels = [int(line.rstrip()) for line in f]
    loss_sum, hit1, hit5 = 0.0, 0.0, 0.0
    all_preds, all_targets = [], []
    with torch.no_grad():
        for i, x in batches(images, t, args.batch_size):
            y = labels[i:i + len(x)]
            out = model(x)
            if valid_labels is not None:
                out = out[:, valid_labels]
            loss_sum += F.cross_entropy(out, y).item() * len(x)
            all_preds.append(out.argmax(1))
            all_targets.append(y)
            a1, a5 = accuracy(out, y, topk=(1, 5))
            hit1 += a1.item() * len(x) / 100
            hit5 += a5.item() * len(x) / 100
    n = len(images)
    result = {'top1': 100 * round(hit1) / n, 'top5': 100 * round(hit5) / n, 'loss': loss_sum / n, 'n': n,
              'pooled': pooled}
    if args.metrics_avg:  # validate.py's
        from sklearn.metrics import f1_score, precision_score, recall_score
        y_true, y_pred = torch.cat(all_targets).numpy(), torch.cat(all_preds).numpy()
        for key, f in (('precision', precision_score), ('recall', recall_score), ('f1_score', f1_score)):
            score = f(y_true, y_pred, average=args.metrics_avg, zero_division=0)
            result[f'{args.metrics_avg}_{key}'] = round(100 * score, 4)
    print(json.dumps(result))


def cmd_infer(args):
    torch.set_num_threads(2)
    model, t = load_model(args), transform(args)
    if args.folder:
        names, images = folder_images(args.folder)
    else:
        images, _ = fmnist_test(args.num_samples)
        names = [f'fashion-mnist[{i}]' for i in range(len(images))]
    rows = []
    with torch.no_grad():
        for i, x in batches(images, t, args.batch_size):
            prob = model(x).softmax(-1)
            values, indices = prob.topk(args.topk)
            for k in range(len(x)):
                rows.append({'filename': names[i + k], 'index': indices[k].tolist(), 'prob': values[k].tolist()})
    print(json.dumps(rows))


def cmd_images(args):
    os.makedirs(args.checkpoint, exist_ok=True)
    images, _ = fmnist_test(args.num_samples)
    for i, im in enumerate(images):
        im.save(os.path.join(args.checkpoint, f'img{i:03d}.png'))
    print(json.dumps({'written': len(images)}))


def cmd_valimages(args):
    images, labels = fmnist_test(args.num_samples)
    for i, (im, label) in enumerate(zip(images, labels.tolist())):
        folder = os.path.join(args.checkpoint, str(label))
        os.makedirs(folder, exist_ok=True)
        im.save(os.path.join(folder, f'ILSVRC2012_val_{i + 1:08d}.JPEG'), quality=95)
    with open(args.checkpoint + '.json', 'w') as f:
        json.dump([[label] for label in labels.tolist()], f)
    print(json.dumps({'written': len(images)}))


def cmd_scores(args):
    from sklearn.metrics import f1_score, precision_score, recall_score
    g = torch.Generator().manual_seed(0)
    targets = torch.randint(0, 11, (300,), generator=g)
    predictions = torch.where(torch.rand(300, generator=g) < 0.6, targets, torch.randint(0, 12, (300,), generator=g))
    predictions[predictions == 3] = 4  # class 3 never predicted
    predictions[predictions == 7] = 8  # nor 7; 11 only predicted (no target draws it)
    safetensors.torch.save_file({'targets': targets, 'predictions': predictions},
                                os.path.join(args.checkpoint, 'scores.safetensors'))
    out = {}
    for average in ('micro', 'macro', 'weighted'):
        out[average] = [float(f(targets.numpy(), predictions.numpy(), average=average, zero_division=0))
                        for f in (precision_score, recall_score, f1_score)]
    print(json.dumps(out))


def cmd_decay(_):
    from timm.utils import check_batch_size_retry, decay_batch_step
    out = {f'{steps}_{int(no_odd)}': [decay_batch_step(n, steps, no_odd) for n in range(1101)]
           for steps in (1, 2, 4) for no_odd in (False, True)}
    errors = ['DefaultCPUAllocator: not enough memory: you tried to allocate 1 bytes.',
              'CUDA error: an ILLEGAL memory access was encountered',
              'required rank 4 tensor to use channels_last format', 'shape mismatch']
    out['retry'] = {e: check_batch_size_retry(e) for e in errors}
    print(json.dumps(out))


def cmd_imagenet(_):
    from timm.data import ImageNetInfo
    info = ImageNetInfo('imagenet-1k')
    print(json.dumps({'name': info.label_names(), 'description': info.label_descriptions(),
                      'detailed': info.label_descriptions(detailed=True)}))


def cmd_parse(args):
    path = args.checkpoint
    if path.endswith('.json'):
        with open(path) as f:
            data = json.load(f)
        rows = data if isinstance(data, list) else [data]
    else:
        import csv
        with open(path, newline='') as f:
            rows = list(csv.DictReader(f))
    print(json.dumps({'rows': len(rows), 'columns': list(rows[0].keys()) if rows else [], 'first': rows[0] if rows else {}}))


def cmd_svg(args):
    import csv
    import xml.etree.ElementTree as ET
    with open(args.csv, newline='') as f:
        table = list(csv.DictReader(f))
    ns = {'s': 'http://www.w3.org/2000/svg'}
    root = ET.parse(args.checkpoint).getroot()
    assert root.tag == '{http://www.w3.org/2000/svg}svg', root.tag
    errors, points = {}, {}
    for g in root.iter('{http://www.w3.org/2000/svg}g'):
        left, top, width, height = map(float, g.get('data-area').split())
        for line in g.findall('s:polyline', ns):
            name = line.get('data-series')
            x0, x1 = map(float, line.get('data-x-range').split())
            y0, y1 = map(float, line.get('data-y-range').split())
            pts = [tuple(map(float, p.split(','))) for p in line.get('points').split()]
            data = [(x0 + (px - left) / width * (x1 - x0), y0 + (top + height - py) / height * (y1 - y0))
                    for px, py in pts]
            expected = [(float(r['epoch']), float(r[name])) for r in table if r[name] != '']
            assert len(data) == len(expected), (name, len(data), len(expected))
            # Relative to the axis span: coordinates are written with 3 decimals.
            errors[name] = max(max(abs(a[0] - b[0]) / (x1 - x0), abs(a[1] - b[1]) / (y1 - y0))
                               for a, b in zip(data, expected))
            points[name] = len(data)
    print(json.dumps({'series': sorted(errors), 'max_rel_error': max(errors.values()), 'points': points}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument('command',
                   choices=['validate', 'infer', 'images', 'valimages', 'scores', 'decay', 'imagenet', 'parse', 'svg',
                            'save'])
    p.add_argument('checkpoint')  # the folder for 'images'
    p.add_argument('--model', default='resnet18')
    p.add_argument('--num-classes', type=int, default=10)
    p.add_argument('--num-samples', type=int, default=256)
    p.add_argument('--folder', default='')
    p.add_argument('--csv', default='')
    p.add_argument('-b', '--batch-size', type=int, default=64)
    p.add_argument('--topk', type=int, default=5)
    p.add_argument('--img-size', type=int, default=28)
    p.add_argument('--interpolation', default='bicubic')
    p.add_argument('--mean', type=float, default=0.2860)
    p.add_argument('--std', type=float, default=0.3530)
    p.add_argument('--crop-pct', type=float, default=0.875)
    p.add_argument('--crop-border-pixels', type=int, default=None)
    p.add_argument('--reparam', action='store_true')
    p.add_argument('--test-pool', action='store_true')
    p.add_argument('--metrics-avg', default='')
    p.add_argument('--valid-labels', default='')
    args = p.parse_args()
    {'validate': cmd_validate, 'infer': cmd_infer, 'images': cmd_images, 'valimages': cmd_valimages, 'parse': cmd_parse, 'svg': cmd_svg,
     'save': cmd_save, 'scores': cmd_scores, 'decay': cmd_decay,
     'imagenet': cmd_imagenet}[args.command](args)


if __name__ == '__main__':
    main()

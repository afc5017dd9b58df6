"""Test oracle for the data pipeline: PIL / torchvision / timm produce the
expected values that the C++ tests compare against.

Usage: data_oracle.py <command> <outdir>
  resize   raw input images + PIL resize / crop+resize results, manifest.txt
  decode   JPEG and PNG files + PIL's convert('RGB') / convert('L'), manifest.txt
  enhance  PIL ImageEnhance Brightness / Contrast / Color results, manifest.txt
  folder   a folder tree; writes timm's ReaderImageFolder samples to samples.txt
  fmnist   Fashion-MNIST read with numpy: counts, first labels, pixel sums
  eval     timm.data.create_transform(is_training=False / no_aug) outputs + reprs
  torchvision  synthetic files in torchvision's layouts (CIFAR pickles written by
           Python 3 under protocol 2 and hand-assembled as Python 2 wrote them,
           MNIST / KMNIST / FashionMNIST / QMNIST IDX files), read with timm's
           create_dataset('torch/...'); manifest.txt; hostile CIFAR batches
           under hostile/<case>/
  dataconfig  timm.data.resolve_data_config's input_size and crop_pct for the
           pretrained cfgs of resnet18 (a test size and crop), nfnet_f0 (a test
           size only) and vit_small_patch16_224 (neither), with and without
           use_test_size and size / crop flags; prints them as JSON

Images are written raw (H x W x C, uint8, row-major); manifest lines are
whitespace-separated fields described per command.
"""
import gzip
import os
import sys

import numpy as np
from PIL import Image, ImageEnhance

FMNIST = '/usr/share/datasets/fashion-mnist'
FILTERS = {
    'nearest': Image.Resampling.NEAREST,
    'bilinear': Image.Resampling.BILINEAR,
    'bicubic': Image.Resampling.BICUBIC,
    'box': Image.Resampling.BOX,
    'hamming': Image.Resampling.HAMMING,
    'lanczos': Image.Resampling.LANCZOS,
}


def fmnist_images(prefix, count):
    with gzip.open(os.path.join(FMNIST, f'{prefix}-images-idx3-ubyte.gz'), 'rb') as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    return data[16:16 + count * 784].reshape(count, 28, 28)


def test_images():
    """name -> HxWxC uint8: random noise, smooth gradients, Fashion-MNIST."""
    rng = np.random.RandomState(0)
    yy, xx = np.mgrid[0:61, 0:83].astype(np.float64)
    smooth = np.stack([
        127.5 + 127.5 * np.sin(xx / 9.0) * np.cos(yy / 13.0),
        255.0 * xx / 82.0,
        255.0 * (yy / 60.0) ** 2,
    ], axis=-1)
    images = {
        'noise_rgb': rng.randint(0, 256, (37, 53, 3)).astype(np.uint8),
        'smooth_rgb': np.clip(np.round(smooth), 0, 255).astype(np.uint8),
        'noise_l': rng.randint(0, 256, (31, 29, 1)).astype(np.uint8),
    }
    for i, img in enumerate(fmnist_images('train', 2)):
        images[f'fmnist{i}'] = img[..., None].copy()
    return images


def to_pil(a):
    return Image.fromarray(a[..., 0] if a.shape[2] == 1 else a)


def from_pil(im):
    a = np.asarray(im)
    return a[..., None] if a.ndim == 2 else a


def cmd_resize(out):
    lines = []
    for name, a in test_images().items():
        a.tofile(os.path.join(out, f'{name}.in'))
        h, w, c = a.shape
        sizes = [(h // 2, w // 3), (int(h * 0.37) or 1, int(w * 0.61) or 1), (h * 2 + 3, w * 3 - 1),
                 (h + 7, max(1, w // 4)), (13, 224), (h, w + 1),
                 (max(1, h // 4), w - 2)]  # the last runs Pillow 13's vertical pass first
        for fname, filt in FILTERS.items():
            for oh, ow in sizes:
                res = from_pil(to_pil(a).resize((ow, oh), filt))
                tag = f'{name}_{fname}_{oh}x{ow}'
                res.tofile(os.path.join(out, tag + '.out'))
                # kind name in_h in_w c out_h out_w filter top left crop_h crop_w expected
                lines.append(f'resize {name} {h} {w} {c} {oh} {ow} {fname} 0 0 {h} {w} {tag}.out')
            # torchvision's resized_crop: crop (inside the image), then resize.
            top, left, ch, cw = h // 5, w // 7, h // 2 + 1, w // 2 + 3
            for oh, ow in [(11, 17), (h * 2, cw), (3, cw - 1)]:
                res = from_pil(to_pil(a).crop((left, top, left + cw, top + ch)).resize((ow, oh), filt))
                tag = f'{name}_{fname}_crop_{oh}x{ow}'
                res.tofile(os.path.join(out, tag + '.out'))
                lines.append(f'crop {name} {h} {w} {c} {oh} {ow} {fname} {top} {left} {ch} {cw} {tag}.out')
    with open(os.path.join(out, 'manifest.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


def cmd_decode(out):
    rng = np.random.RandomState(1)
    yy, xx = np.mgrid[0:45, 0:70].astype(np.float64)
    rgb = np.stack([xx * 3.6, yy * 5.6, 128 + 100 * np.sin((xx + yy) / 7.0)], axis=-1)
    rgb = np.clip(rgb + rng.randint(-20, 21, rgb.shape), 0, 255).astype(np.uint8)
    rgba = np.concatenate([rgb, rng.randint(0, 256, (45, 70, 1)).astype(np.uint8)], axis=-1)
    gray = rgb[..., 1].copy()
    files = {}
    files['photo.jpg'] = lambda p: Image.fromarray(rgb).save(p, quality=90)
    files['photo444.jpg'] = lambda p: Image.fromarray(rgb).save(p, quality=95, subsampling=0)
    files['gray.jpg'] = lambda p: Image.fromarray(gray).save(p, quality=90)
    files['cmyk.jpg'] = lambda p: Image.fromarray(rgb).convert('CMYK').save(p, quality=90)
    files['rgb.png'] = lambda p: Image.fromarray(rgb).save(p)
    files['rgba.png'] = lambda p: Image.fromarray(rgba).save(p)
    files['gray.png'] = lambda p: Image.fromarray(gray).save(p)
    files['la.png'] = lambda p: Image.fromarray(rgba[..., [0, 3]]).save(p)
    files['gray1.png'] = lambda p: Image.fromarray(gray > 128).save(p)
    files['palette.png'] = lambda p: Image.fromarray(rgb).quantize(37).save(p)
    files['palette_trns.png'] = lambda p: Image.fromarray(rgb).quantize(16).save(p, transparency=3)
    files['gray16.png'] = lambda p: Image.fromarray((gray.astype(np.uint16) * 3)).save(p)
    lines = []
    for name, write in files.items():
        path = os.path.join(out, name)
        write(path)
        im = Image.open(path)
        for mode, ext in (('RGB', 'rgb'), ('L', 'l')):
            a = from_pil(im.convert(mode))
            a.tofile(path + '.' + ext)
        h, w = a.shape[:2]
        lines.append(f'{name} {h} {w} {im.mode}')
    # A truncated JPEG and a truncated PNG, which PIL refuses to load.
    for name in ('photo.jpg', 'rgb.png'):
        data = open(os.path.join(out, name), 'rb').read()
        open(os.path.join(out, 'truncated_' + name), 'wb').write(data[:len(data) // 2])
    with open(os.path.join(out, 'manifest.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


def cmd_enhance(out):
    images = test_images()
    lines = []
    for name in ('noise_rgb', 'smooth_rgb', 'noise_l'):
        a = images[name]
        a.tofile(os.path.join(out, f'{name}.in'))
        h, w, c = a.shape
        for op, cls in (('brightness', ImageEnhance.Brightness), ('contrast', ImageEnhance.Contrast),
                        ('saturation', ImageEnhance.Color)):
            for factor in (0.0, 0.6, 0.8312, 1.0, 1.2345, 1.4, 2.7):
                res = from_pil(cls(to_pil(a)).enhance(factor))
                tag = f'{name}_{op}_{factor}'
                res.tofile(os.path.join(out, tag + '.out'))
                lines.append(f'{name} {h} {w} {c} {op} {factor!r} {tag}.out')
    with open(os.path.join(out, 'manifest.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


def cmd_folder(root):
    from timm.data.readers.reader_image_folder import ReaderImageFolder
    tiny = Image.fromarray(np.full((4, 5, 3), 77, np.uint8))
    layout = [
        'class10/img2.png', 'class10/img10.PNG', 'class10/IMG1.jpg',
        'class2/b.JPEG', 'class2/a.jpeg', 'class2/notes.txt',
        'Class1/x1.png', 'Class1/x01b.png', 'Class1/x001c.png',
        'zeta/nested/deep3.png', 'zeta/nested/deep20.png', 'zeta/top.png',
        'alpha_9/y.png', 'Alpha_10/z.png',
        'root_image.png', '.hidden.png', 'noext', 'class2/.png',
    ]
    for rel in layout:
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if rel.lower().endswith(('.png', '.jpg', '.jpeg')):
            tiny.save(path, format='PNG')
        else:
            open(path, 'w').write('not an image')
    reader = ReaderImageFolder(root)
    with open(os.path.join(root, '..', 'samples.txt'), 'w') as f:
        for path, target in reader.samples:
            f.write(f'{path}\t{target}\n')


def cmd_classmap(out):
    """--class-map: cmd_folder's tree in OUT/root, a tar of it (OUT/root.tar),
    the maps OUT/map.txt (with a class that has no folder) and OUT/map.pkl,
    and what timm's ReaderImageFolder and ReaderImageInTar make of them:
    OUT/<reader>_<map>.txt, one 'path<TAB>target' line per sample (the tar's
    member path)."""
    import pickle
    import tarfile
    from timm.data.readers.reader_image_in_tar import ReaderImageInTar
    from timm.data.readers.reader_image_folder import ReaderImageFolder
    root = os.path.join(out, 'root')
    cmd_folder(root)
    with tarfile.open(os.path.join(out, 'root.tar'), 'w') as tf:
        for dirpath, _, files in sorted(os.walk(root)):
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                tf.add(path, arcname=os.path.relpath(path, root))
    with open(os.path.join(out, 'map.txt'), 'w') as f:
        f.write('zeta\nclass2\nno_such_class\n  Class1 \r\nnested\n')
    with open(os.path.join(out, 'map.pkl'), 'wb') as f:
        pickle.dump({'class10': 4, 'alpha_9': 0, 'absent': 2}, f)
    for map_name in ('txt', 'pkl'):
        class_map = os.path.join(out, 'map.' + map_name)
        folder = ReaderImageFolder(root, class_map=class_map)
        with open(os.path.join(out, f'folder_{map_name}.txt'), 'w') as f:
            for path, target in folder.samples:
                f.write(f'{path}\t{target}\n')
        tar = ReaderImageInTar(os.path.join(out, 'root.tar'), class_map=class_map)
        with open(os.path.join(out, f'tar_{map_name}.txt'), 'w') as f:
            for i in range(len(tar)):
                f.write(f'{tar._filename(i)}\t{tar.targets[i]}\n')


def cmd_fmnist(_):
    for prefix in ('train', 't10k'):
        with gzip.open(os.path.join(FMNIST, f'{prefix}-labels-idx1-ubyte.gz'), 'rb') as f:
            labels = np.frombuffer(f.read(), dtype=np.uint8)[8:]
        with gzip.open(os.path.join(FMNIST, f'{prefix}-images-idx3-ubyte.gz'), 'rb') as f:
            images = np.frombuffer(f.read(), dtype=np.uint8)[16:].reshape(-1, 28, 28)
        print(prefix, len(labels), len(images), ' '.join(str(int(x)) for x in labels[:32]),
              ' '.join(str(int(images[i].astype(np.int64).sum())) for i in (0, 1, len(images) - 1)))


def cmd_eval(out):
    import torch
    from timm.data import create_transform
    rng = np.random.RandomState(2)
    images = {}
    for name, (h, w) in {'wide': (181, 263), 'tall': (300, 97), 'small': (40, 50), 'square': (256, 256)}.items():
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
        a = np.stack([127 + 120 * np.sin(xx / 11.0), 255 * yy / h, 127 + 120 * np.cos((xx + yy) / 17.0)], -1)
        images[name] = np.clip(a + rng.randint(-30, 31, a.shape), 0, 255).astype(np.uint8)
    configs = [
        # mode interpolation crop_pct H W no_aug crop_border_pixels
        ('center', 'bilinear', 0.875, 224, 224, 0, 0),
        ('center', 'bicubic', 0.95, 160, 160, 0, 0),
        ('center', 'bilinear', 0.9, 96, 128, 0, 0),
        ('squash', 'bicubic', 0.875, 112, 100, 0, 0),
        ('border', 'bilinear', 0.875, 120, 120, 0, 0),
        ('center', 'bilinear', 1.0, 64, 48, 1, 0),
        ('center', 'bilinear', 0.875, 96, 96, 0, 7),
        ('squash', 'bicubic', 0.9, 64, 80, 0, 12),
    ]
    lines = []
    for name, a in images.items():
        a.tofile(os.path.join(out, f'{name}.in'))
        for k, (mode, interp, crop_pct, h, w, no_aug, border) in enumerate(configs):
            t = create_transform((3, h, w), is_training=bool(no_aug), no_aug=bool(no_aug), interpolation=interp,
                                 crop_pct=crop_pct, crop_mode=mode, crop_border_pixels=border or None,
                                 use_prefetcher=True)
            res = t(Image.fromarray(a))
            res = res.numpy() if isinstance(res, torch.Tensor) else np.asarray(res)
            np.ascontiguousarray(res.transpose(1, 2, 0)).tofile(os.path.join(out, f'{name}_{k}.out'))
            with open(os.path.join(out, f'repr_{k}.txt'), 'w') as f:
                f.write(repr(t))
            lines.append(f'{name} {a.shape[0]} {a.shape[1]} {mode} {interp} {crop_pct!r} {h} {w} {no_aug} {border} '
                         f'{res.shape[1]} {res.shape[2]} {name}_{k}.out repr_{k}.txt')
    with open(os.path.join(out, 'manifest.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')
    # Train pipelines: only their reprs are comparable (the RNGs differ).
    train = [
        dict(),
        dict(interpolation='random', vflip=0.5, color_jitter=None, scale=(0.35, 1.0)),
        dict(interpolation='bicubic', hflip=0.0, color_jitter=0.25, ratio=(0.5, 2.0)),
    ]
    for k, kw in enumerate(train):
        t = create_transform((3, 192, 160), is_training=True, use_prefetcher=True, **kw)
        with open(os.path.join(out, f'repr_train_{k}.txt'), 'w') as f:
            f.write(repr(t))


def _idx(path, array, type_code):
    """An IDX file: magic 0x0000TTNN, big-endian dims, big-endian data."""
    import struct
    with open(path, 'wb') as f:
        f.write(struct.pack('>I', (type_code << 8) | array.ndim))
        f.write(struct.pack('>' + 'I' * array.ndim, *array.shape))
        f.write(array.astype('>i4' if type_code == 0x0C else np.uint8).tobytes())


def _py2_binstring(b):
    import struct
    return (b'U' + bytes([len(b)]) + b) if len(b) < 256 else (b'T' + struct.pack('<I', len(b)) + b)


def _py2_int(i):
    import struct
    return b'K' + bytes([i]) if i < 256 else b'M' + struct.pack('<H', i) if i < 65536 else b'J' + struct.pack('<i', i)


def _py2_cifar_pickle(items, fortran_op=b'\x89'):
    """A CIFAR batch as Python 2's cPickle (protocol 2) wrote it: str keys and
    data as SHORT_BINSTRING / BINSTRING, numpy.core.multiarray._reconstruct."""
    out = b'\x80\x02}q\x01('
    for key, value in items:
        out += _py2_binstring(key.encode())
        if isinstance(value, np.ndarray):
            out += b'cnumpy.core.multiarray\n_reconstruct\nq\x02cnumpy\nndarray\nq\x03K\x00\x85U\x01b\x87R('
            out += b'K\x01' + b''.join(_py2_int(n) for n in value.shape) + bytes([0x84 + len(value.shape)])
            out += b'cnumpy\ndtype\nq\x04U\x02u1K\x00K\x01\x87R(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb'
            out += fortran_op + _py2_binstring(value.tobytes()) + b'tb'
        elif isinstance(value, list):
            out += b'](' + b''.join(_py2_int(v) if isinstance(v, int) else _py2_binstring(v.encode()) for v in value)
            out += b'e'
        else:
            out += _py2_binstring(value.encode())
    return out + b'u.'


def cmd_torchvision(out):
    import pickle
    import pickletools
    import torchvision.datasets.cifar as tv_cifar
    from timm.data import create_dataset
    # The synthetic files cannot have the real ones' md5s.
    tv_cifar.check_integrity = lambda fpath, md5=None: os.path.isfile(fpath)
    rng = np.random.RandomState(7)

    def batch(n, classes, label_key):
        data = rng.randint(0, 256, (n, 3072)).astype(np.uint8)
        labels = [int(x) for x in rng.randint(0, classes, n)]
        items = [('batch_label', 'batch'), ('data', data), (label_key, labels),
                 ('filenames', [f'img_{i}.png' for i in range(n)])]
        if label_key == 'fine_labels':
            items.insert(2, ('coarse_labels', [int(x) for x in rng.randint(0, 20, n)]))
        return items

    def write(path, items, py2, fortran_op=b'\x89'):
        data = _py2_cifar_pickle(items, fortran_op) if py2 else pickle.dumps(dict(items), protocol=2)
        pickletools.dis(data, out=open(os.devnull, 'w'))  # well-formed
        open(path, 'wb').write(data)
        return data

    c10 = os.path.join(out, 'cifar-10-batches-py')
    os.makedirs(c10, exist_ok=True)
    for k in range(1, 6):  # batches 1 and 4 as Python 2 wrote them
        write(os.path.join(c10, f'data_batch_{k}'), batch(5 + k, 10, 'labels'), py2=k in (1, 4))
    test10 = write(os.path.join(c10, 'test_batch'), batch(6, 10, 'labels'), py2=False)
    pickle.dump({'label_names': [f'c{i}' for i in range(10)]}, open(os.path.join(c10, 'batches.meta'), 'wb'), 2)
    c100 = os.path.join(out, 'cifar-100-python')
    os.makedirs(c100, exist_ok=True)
    write(os.path.join(c100, 'train'), batch(9, 100, 'fine_labels'), py2=False)
    write(os.path.join(c100, 'test'), batch(4, 100, 'fine_labels'), py2=True, fortran_op=b'I00\n')
    pickle.dump({'fine_label_names': [f'f{i}' for i in range(100)], 'coarse_label_names': [f'g{i}' for i in range(20)]},
                open(os.path.join(c100, 'meta'), 'wb'), 2)
    for cls, n_train, n_test, qmnist in (('MNIST', 7, 3, False), ('KMNIST', 4, 5, False),
                                         ('FashionMNIST', 6, 2, False), ('QMNIST', 5, 4, True)):
        raw = os.path.join(out, cls, 'raw')
        os.makedirs(raw, exist_ok=True)
        for split, n in (('train', n_train), ('test' if qmnist else 't10k', n_test)):
            prefix = f'qmnist-{split}' if qmnist else split
            _idx(os.path.join(raw, f'{prefix}-images-idx3-ubyte'), rng.randint(0, 256, (n, 28, 28)), 0x08)
            if qmnist:  # class, NIST writer, ... as int32; torchvision's target is column 0
                labels = np.concatenate([rng.randint(0, 10, (n, 1)), rng.randint(0, 100000, (n, 7))], axis=1)
                _idx(os.path.join(raw, f'{prefix}-labels-idx2-int'), labels, 0x0C)
            else:
                _idx(os.path.join(raw, f'{prefix}-labels-idx1-ubyte'), rng.randint(0, 10, n), 0x08)
    # KMNIST gzipped only for its test split: torchvision reads uncompressed files, so keep both.
    kraw = os.path.join(out, 'KMNIST', 'raw')
    with open(os.path.join(kraw, 't10k-images-idx3-ubyte'), 'rb') as f:
        gzip.open(os.path.join(kraw, 't10k-images-idx3-ubyte.gz'), 'wb').write(f.read())

    lines = []
    for name in ('torch/cifar10', 'Torch/CIFAR100', 'torch/mnist', 'torch/kmnist', 'torch/fashion_mnist',
                 'torch/qmnist'):
        for split in ('train', 'validation', 'training', 'train[:50%]'):
            ds = create_dataset(name, root=out, split=split, download=False)
            labels = [int(ds[i][1]) for i in range(len(ds))]
            lines.append(f'ds {name} {split} {len(ds)} {len(ds.classes)} ' + ' '.join(map(str, labels)))
            for i in sorted({0, len(ds) // 2, len(ds) - 1}):
                img = from_pil(ds[i][0])
                tag = f'{name.replace("/", "_")}_{split.replace("[", "_").replace(":", "_").replace("%]", "")}_{i}'
                img.tofile(os.path.join(out, tag + '.raw'))
                lines.append(f'img {name} {split} {i} {img.shape[0]} {img.shape[1]} {img.shape[2]} {tag}.raw')
    with open(os.path.join(out, 'manifest.txt'), 'w') as f:
        f.write('\n'.join(lines) + '\n')

    # Hostile batches, each in hostile/<case>/cifar-10-batches-py/test_batch.
    def hostile(case, data):
        folder = os.path.join(out, 'hostile', case, 'cifar-10-batches-py')
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, 'test_batch'), 'wb').write(data)
    hostile('truncated', test10[:len(test10) // 2])
    hostile('global', b'\x80\x02cos\nsystem\nX\x04\x00\x00\x00echo\x85R.')
    items = batch(5, 10, 'labels')
    big = dict(items)['data']
    shape_items = [(k, v) for k, v in items if k != 'data']
    py2 = _py2_cifar_pickle([('data', big)] + shape_items)
    # The shape says 6 images; the data holds 5.
    hostile('shape', py2.replace(b'K\x01K\x05M\x00\x0c\x86', b'K\x01K\x06M\x00\x0c\x86', 1))
    short = dict(items)
    short['labels'] = short['labels'][:4]
    hostile('labels', pickle.dumps(short, protocol=2))


def cmd_dataconfig(_):
    import json
    from timm.data import resolve_data_config
    from timm.models import get_pretrained_cfg
    cases = []
    for name in ('resnet18', 'nfnet_f0', 'vit_small_patch16_224'):
        cfg = get_pretrained_cfg(name).to_dict()
        for args in ({}, {'img_size': 160}, {'input_size': (3, 100, 120)}, {'crop_pct': 0.8}):
            for use_test_size in (False, True):
                resolved = resolve_data_config(dict(args), pretrained_cfg=cfg, use_test_size=use_test_size)
                cases.append({
                    'cfg': {k: cfg.get(k) for k in ('input_size', 'crop_pct', 'test_input_size', 'test_crop_pct')},
                    'args': args, 'use_test_size': use_test_size,
                    'input_size': list(resolved['input_size']), 'crop_pct': resolved['crop_pct']})
    print(json.dumps(cases))


if __name__ == '__main__':
    command, out = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ''
    if out:
        os.makedirs(out, exist_ok=True)
    {'resize': cmd_resize, 'decode': cmd_decode, 'enhance': cmd_enhance, 'folder': cmd_folder,
     'fmnist': cmd_fmnist, 'classmap': cmd_classmap, 'eval': cmd_eval, 'torchvision': cmd_torchvision,
     'dataconfig': cmd_dataconfig}[command](out)

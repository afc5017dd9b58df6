"""Test oracle for the image-in-tar dataset: builds tar shards of Fashion-MNIST
PNGs and JPEGs and lists them with timm's ReaderImageInTar.

Usage: tar_oracle.py <outdir>
Writes:
  <outdir>/shards/*.tar    a folder of shards: class folders, top-level members
                           (labelled by the shard), a tar inside a tar, a
                           GNU-format shard with long names, a pax long name,
                           non-image members and folder entries
  <outdir>/single.tar      one tar whose members are class-folder/image
  <outdir>/<set>.txt       for set in shards, single: one sample a line,
                           "<tar path>:<member path>\t<target>\t<raw file>"
                           where <raw file> holds PIL's convert('RGB') pixels
                           (H x W x 3) of that sample, "<h> <w> <name>"
"""
import io
import os
import sys
import tarfile

import numpy as np
from PIL import Image

from timm.data.readers.reader_image_in_tar import ReaderImageInTar

sys.path.insert(0, os.path.dirname(__file__))
from data_oracle import fmnist_images  # noqa: E402


def encode(img, fmt):
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format=fmt, **({'quality': 90} if fmt == 'JPEG' else {}))
    return buf.getvalue()


def add(tf, name, data):
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    tf.addfile(ti, io.BytesIO(data))


def add_dir(tf, name):
    ti = tarfile.TarInfo(name)
    ti.type = tarfile.DIRTYPE
    tf.addfile(ti)


def tar_bytes(members, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=fmt) as tf:
        for name, data in members:
            add(tf, name, data)
    return buf.getvalue()


def build(outdir):
    images = iter(fmnist_images('train', 40))
    png = lambda: encode(next(images), 'PNG')  # noqa: E731
    jpg = lambda: encode(np.stack([next(images)] * 3, axis=-1), 'JPEG')  # noqa: E731
    shards = os.path.join(outdir, 'shards')
    os.makedirs(shards)
    with tarfile.open(os.path.join(shards, 'shard2.tar'), 'w', format=tarfile.PAX_FORMAT) as tf:
        add_dir(tf, 'Coat')
        add(tf, 'Coat/img10.png', png())
        add(tf, 'Coat/img9.PNG', png())
        add(tf, 'bag/img1.jpg', jpg())
        add(tf, 'top_level.jpeg', jpg())  # label: the shard's name
        add(tf, 'notes.txt', b'not an image')
        add(tf, 'bag/' + 'very_long_name_' * 8 + '.png', png())  # pax path record
    with tarfile.open(os.path.join(shards, 'shard10.tar'), 'w', format=tarfile.GNU_FORMAT) as tf:
        add(tf, 'shirt/img2.png', png())  # labels differing only in case would tie in timm's order
        add(tf, 'dress/a/' + 'x' * 120 + '.jpg', jpg())  # GNU long name; label: the leaf folder 'a'
        add(tf, 'ankle_boot/img3.png', png())
        # a tar inside the tar: labels from its own folders, or its name
        add(tf, 'inner.tar', tar_bytes([('sandal/img4.png', png()), ('img5.png', png())]))
    with tarfile.open(os.path.join(shards, 'shard1.tar'), 'w', format=tarfile.USTAR_FORMAT) as tf:
        add(tf, 'prefix_folder_' * 5 + '/Coat/img1.png', png())  # ustar prefix field
        add(tf, 'dress/img7.jpg', jpg())
    with open(os.path.join(shards, 'readme.md'), 'w') as f:
        f.write('not a tar\n')
    with tarfile.open(os.path.join(outdir, 'single.tar'), 'w') as tf:
        for cls in ('class10', 'class2', 'Class1'):
            for i in (11, 3, 20):
                add(tf, f'{cls}/img{i}.png', png())


def listing(outdir, root, set_name):
    reader = ReaderImageInTar(root)
    lines = []
    for i in range(len(reader)):
        ti, parent_fn, child_ti = reader.samples[i]
        tar_path = os.path.join(root, parent_fn) if parent_fn else root
        if child_ti is not None:
            tar_path = tar_path + '/' + child_ti.name
        f, target = reader[i]
        img = np.asarray(Image.open(f).convert('RGB'))
        raw = os.path.join(outdir, f'{set_name}{i}.raw')
        img.tofile(raw)
        lines.append(f'{tar_path}:{ti.path}\t{int(target)}\t{img.shape[0]} {img.shape[1]} {raw}\n')
    with open(os.path.join(outdir, f'{set_name}.txt'), 'w') as f:
        f.write(''.join(lines))


def main():
    outdir = sys.argv[1]
    build(outdir)
    listing(outdir, os.path.join(outdir, 'shards'), 'shards')
    listing(outdir, os.path.join(outdir, 'single.tar'), 'single')


if __name__ == '__main__':
    main()

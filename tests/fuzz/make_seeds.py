#!/usr/bin/env python3
"""Writes the fuzz targets' inputs: corpus/<target>/ (small valid files, the
seeds that mutations start from) and regressions/<target>/ (the hostile files
that tests/core/test_hostile_io.cpp and test_hostile_data.cpp craft in code,
as files that every smoke run replays).

Run with the project's Python (torch, numpy, PIL and safetensors):
    ~/.cache/timm-cpp/venv-torch<ver>-timm<ver>/bin/python tests/fuzz/make_seeds.py
It rewrites both folders (the whole corpus stays under 300 KB). torch.save
records a random serialization id, so the .pth seeds differ on every run.
"""

import argparse
import collections
import gzip
import io
import os
import shutil
import struct
import tarfile
import zlib

import numpy as np
import safetensors.numpy
import safetensors.torch
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


class Writer:
    """Writes files under <root>/<kind>/<target>/ and counts their bytes."""

    def __init__(self, root):
        self.root = root
        self.total = 0

    def put(self, kind, target, name, data):
        folder = os.path.join(self.root, kind, target)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        self.total += len(data)


def saved(obj, **kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer, **kwargs)
    return buffer.getvalue()


# ---- Pickles and zip archives, byte by byte (as test_hostile_io.cpp) --------

PROTO = b"\x80\x02"


def le(value, size):
    return (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def pstr(s):
    s = s.encode() if isinstance(s, str) else s
    return b"X" + le(len(s), 4) + s


def glob(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def long8(v):
    return b"\x8a\x08" + le(v, 8)


def int_tuple(values):
    return b"(" + b"".join(long8(v) for v in values) + b"t"


def storage(key, numel):
    return b"(" + pstr("storage") + glob("torch", "FloatStorage") + pstr(key) + pstr("cpu") + long8(numel) + b"tQ"


def tensor(key, numel, offset, size, stride):
    return (glob("torch._utils", "_rebuild_tensor_v2") + b"(" + storage(key, numel) + long8(offset) +
            int_tuple(size) + int_tuple(stride) + b"\x89" + glob("collections", "OrderedDict") + b")R" + b"tR")


def floats(values):
    return struct.pack("<%df" % len(values), *values)


def torch_archive(pickle, storages=()):
    """A torch.save-like archive written by LibTorch's own zip writer."""
    buffer = io.BytesIO()
    writer = torch._C.PyTorchFileWriter(buffer)
    writer.write_record("data.pkl", pickle, len(pickle))
    for key, data in storages:
        writer.write_record("data/" + key, data, len(data))
    writer.write_end_of_file()
    return buffer.getvalue()


def zip_archive(entries):
    """A zip of entries (dicts: name, data, method, declared, compressed,
    shares), written field by field so that it can lie about sizes."""
    out = b""
    offsets = []
    for e in entries:
        if e.get("shares") is not None:
            offsets.append(offsets[e["shares"]])
            continue
        offsets.append(len(out))
        name, data = e["name"].encode(), e["data"]
        out += (le(0x04034B50, 4) + le(20, 2) + le(0, 2) + le(e.get("method", 0), 2) + le(0, 4) +
                le(zlib.crc32(data), 4) + le(len(data), 4) + le(len(data), 4) + le(len(name), 2) + le(0, 2) + name +
                data)
    directory = len(out)
    for e, offset in zip(entries, offsets):
        name, data = e["name"].encode(), e["data"]
        size = e.get("declared", len(data))
        compressed = e.get("compressed", len(data))
        extra = b""
        if size >= 0xFFFFFFFF:
            extra += le(size, 8)
        if compressed >= 0xFFFFFFFF:
            extra += le(compressed, 8)
        if extra:
            extra = le(1, 2) + le(len(extra), 2) + extra
        out += (le(0x02014B50, 4) + le(45, 2) + le(45, 2) + le(0, 2) + le(e.get("method", 0), 2) + le(0, 4) +
                le(zlib.crc32(data), 4) + le(min(compressed, 0xFFFFFFFF), 4) + le(min(size, 0xFFFFFFFF), 4) +
                le(len(name), 2) + le(len(extra), 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(offset, 4) +
                name + extra)
    size = len(out) - directory
    out += (le(0x06054B50, 4) + le(0, 2) + le(0, 2) + le(len(entries), 2) + le(len(entries), 2) + le(size, 4) +
            le(directory, 4) + le(0, 2))
    return out


def deflated(data):
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush()


VERSION = {"name": "archive/version", "data": b"3\n"}
EMPTY_DICT = {"name": "archive/data.pkl", "data": PROTO + b"}."}


def pth(w):
    torch.manual_seed(0)
    sd = collections.OrderedDict([
        ("conv.weight", torch.randn(2, 1, 3, 3)),
        ("bn.running_mean", torch.zeros(2)),
        ("bn.num_batches_tracked", torch.tensor(3)),
        ("fc.weight", torch.randn(3, 2).half()),
        ("fc.bias", torch.randn(3).bfloat16()),
    ])
    w.put("corpus", "pth", "state_dict.pth", saved(sd))
    base = torch.arange(12, dtype=torch.float32)
    w.put("corpus", "pth", "views.pth", saved({"a": base[2:8].view(2, 3), "b": base.view(3, 4).t(), "c": base}))
    w.put("corpus", "pth", "dtypes.pth", saved({
        "f64": torch.ones(2, dtype=torch.float64), "i64": torch.arange(3), "i32": torch.arange(2, dtype=torch.int32),
        "i16": torch.arange(2, dtype=torch.int16), "i8": torch.arange(2, dtype=torch.int8),
        "u8": torch.arange(2, dtype=torch.uint8), "bool": torch.tensor([True, False]), "scalar": torch.tensor(1.5)}))
    w.put("corpus", "pth", "parameter.pth", saved({"p": torch.nn.Parameter(torch.ones(2, 2))}))
    # A timm training checkpoint (timm/utils/checkpoint_saver.py's keys).
    checkpoint = {
        "epoch": 3,
        "arch": "resnet18",
        "state_dict": sd,
        "optimizer": {"state": {0: {"momentum_buffer": torch.zeros(2)}},
                      "param_groups": [{"lr": 0.1, "momentum": 0.9, "params": [0]}]},
        "args": argparse.Namespace(model="resnet18", lr=0.1, epochs=10),
        "state_dict_ema": None,
        "metric": 71.5,
        "version": 2,
    }
    w.put("corpus", "pth", "checkpoint.pth.tar", saved(checkpoint))
    w.put("corpus", "pth", "list.pth", saved([torch.ones(1), (1, 2.5, "x", b"y", None, True)]))
    w.put("corpus", "pth", "legacy.pth", saved({"w": torch.ones(2)}, _use_new_zipfile_serialization=False))
    pickle = PROTO + b"}(" + pstr("w") + tensor("0", 6, 0, [2, 3], [3, 1]) + b"u."
    w.put("corpus", "pth", "deflated_pickle.pth", zip_archive([
        VERSION, {"name": "archive/data.pkl", "data": deflated(pickle), "method": 8, "declared": len(pickle)},
        {"name": "archive/data/0", "data": floats([1, 2, 3, 4, 5, 6])}]))

    bad = lambda name, data: w.put("regressions", "pth", name, data)
    # Nesting past the limit of 1000 (the test's 100,000 levels crashed the
    # reader's destructors; 1500 are enough to hit the limit).
    bad("deep_tuples.pth", torch_archive(PROTO + b")" + b"\x85" * 1500 + b"."))
    bad("self_list.pth", torch_archive(PROTO + b"]2a."))
    bad("pair_cycle.pth", torch_archive(PROTO + b"]q\x00]q\x01" + b"ah\x01h\x00" + b"a."))
    bad("numel_overflow.pth", torch_archive(PROTO + storage("0", 1 << 62) + b".", [("0", floats([1, 2]))]))
    bad("view_outside.pth", torch_archive(PROTO + tensor("0", 2, 5, [2], [1]) + b".", [("0", floats([1, 2]))]))
    bad("view_expand.pth", torch_archive(PROTO + tensor("0", 1, 0, [1 << 40], [0]) + b".", [("0", floats([1]))]))
    bad("view_overflow.pth",
        torch_archive(PROTO + tensor("0", 1, 0, [0, 1 << 62, 8], [0, 0, 0]) + b".", [("0", floats([1]))]))
    # The memo repeating a 10 kB key 200 times: 2 MB from an 11 kB file.
    repeat = PROTO + pstr("k" * 10000) + b"q\x03" + b"0"
    repeat += b"}q\x01(h\x03" + tensor("0", 1, 0, [1], [1]) + b"u0"
    repeat += b"}(" + b"h\x03h\x01" * 200 + b"u."
    bad("memo_repeat.pth", torch_archive(repeat, [("0", floats([1]))]))
    bad("long_global.pth", torch_archive(PROTO + glob("m" * 5000, "x") + b"."))
    tb = 1 << 40
    bad("zip_stored_1tb.pth", zip_archive([VERSION, dict(EMPTY_DICT, declared=tb, compressed=tb)]))
    bad("zip_sizes_differ.pth", zip_archive([VERSION, dict(EMPTY_DICT, declared=tb)]))
    bad("zip_deflate_bomb.pth", zip_archive([dict(VERSION, method=8, declared=tb), EMPTY_DICT]))
    shared = [VERSION, EMPTY_DICT, {"name": "archive/data/0", "data": b"x" * 2000}]
    shared += [{"name": "archive/data/%d" % k, "data": b"x" * 2000, "shares": 2} for k in range(1, 60)]
    bad("zip_overlapping.pth", zip_archive(shared))
    bad("zip_bzip2.pth", zip_archive([VERSION, dict(EMPTY_DICT, method=12)]))
    bad("zip_junk.pth", b"PK\x03\x04" + b"\x07" * 100)
    cut = bytearray(zip_archive([VERSION, EMPTY_DICT]))
    del cut[len(cut) - 30:len(cut) - 22]
    bad("zip_cut.pth", bytes(cut))
    bad("version_overflow.pth", zip_archive([{"name": "archive/version", "data": b"9" * 23 + b"\n"}, EMPTY_DICT]))
    bad("version_text.pth", zip_archive([{"name": "archive/version", "data": b"three\n"}, EMPTY_DICT]))


# ---- safetensors -------------------------------------------------------------


def safetensors_file(header, data=b""):
    text = header.encode() if isinstance(header, str) else header
    return le(len(text), 8) + text + data


def safetensors_seeds(w):
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3), "f16": np.ones(3, dtype=np.float16),
        "f64": np.array(2.5), "i64": np.arange(2, dtype=np.int64), "i8": np.arange(-2, 2, dtype=np.int8),
        "u8": np.arange(4, dtype=np.uint8), "bool": np.array([True, False]), "empty": np.zeros((0, 3), np.float32)}
    w.put("corpus", "safetensors", "dtypes.safetensors", safetensors.numpy.save(arrays, metadata={"format": "np"}))
    w.put("corpus", "safetensors", "empty.safetensors", safetensors.numpy.save({}))
    bf16 = torch.ones(2, 2, dtype=torch.bfloat16)
    w.put("corpus", "safetensors", "bf16.safetensors", safetensors.torch.save({"w": bf16, "b": torch.zeros(2)}))

    bad = lambda name, data: w.put("regressions", "safetensors", name, data)
    bad("header_2_63.safetensors", le(1 << 63, 8) + b"{}")
    bad("header_past_end.safetensors", le(1000, 8) + b"{}")
    bad("short.safetensors", b"\x02\x00\x00")
    bad("not_json.safetensors", safetensors_file("{'a': 1"))
    bad("array.safetensors", safetensors_file("[1, 2]"))
    bad("dtype.safetensors", safetensors_file('{"a":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4))
    bad("shape_overflow.safetensors",
        safetensors_file('{"a":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,4]}}', b"\0" * 4))
    bad("offsets_past_end.safetensors",
        safetensors_file('{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}', b"\0" * 4))
    bad("offsets_overlap.safetensors", safetensors_file(
        '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}',
        b"\0" * 6))
    bad("offsets_backwards.safetensors",
        safetensors_file('{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}', b"\0" * 4))
    bad("bool_byte.safetensors", safetensors_file('{"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}', b"\x01\x07"))
    bad("duplicate_key.safetensors", safetensors_file(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}',
        b"\0\0"))
    bad("metadata.safetensors", safetensors_file('{"__metadata__":{"a":1}}'))
    bad("deep_json.safetensors", safetensors_file("[" * 2000 + "]" * 2000))


# ---- npy -----------------------------------------------------------------------


def npy(header, payload, version=1):
    out = b"\x93NUMPY" + bytes([version, 0]) + le(len(header), 2 if version == 1 else 4)
    return out + header.encode() + b"\0" * payload


def npy_seeds(w):
    def save(name, array):
        buffer = io.BytesIO()
        np.save(buffer, array)
        w.put("corpus", "npy", name, buffer.getvalue())

    save("f32.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    save("f64_scalar.npy", np.array(1.5))
    save("f16.npy", np.ones(4, dtype=np.float16))
    save("i8.npy", np.arange(-3, 3, dtype=np.int8))
    save("u16.npy", np.arange(3, dtype=np.uint16))
    save("i64_empty.npy", np.zeros((0, 3), dtype=np.int64))
    save("bool.npy", np.array([[True, False]]))
    save("image.npy", np.zeros((1, 3, 4, 4), dtype=np.float32))
    save("fortran.npy", np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)))
    save("big_endian.npy", np.arange(3, dtype=">i4"))

    bad = lambda name, data: w.put("regressions", "npy", name, data)
    f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }"
    # The test's 10 MB header, declared by a file that is short.
    bad("header_10mb.npy", npy(f4 % "(1,)", 4, 2)[:8] + le(10485817, 4) + (f4 % "(1,)").encode())
    bad("numel_2_40.npy", npy(f4 % "(1099511627776,)", 120))
    bad("shape_overflow.npy", npy(f4 % "(4294967296, 4294967296)", 8))
    bad("shape_zero_overflow.npy", npy(f4 % "(0, 4611686018427387904, 4611686018427387904)", 0))
    bad("shape_word.npy", npy(f4 % "(2, x)", 8))
    bad("shape_spaces.npy", npy(f4 % "(2 3)", 24))
    bad("key.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8))
    bad("key_twice.npy", npy("{'descr': '<f4', 'shape': (1,), 'fortran_order': False, 'shape': (2,)}", 8))
    bad("text_after.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", 8))
    bad("order.npy", npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", 8))
    bad("descr_record.npy", npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", 8))
    bad("descr_open.npy", npy("{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", 8))
    bad("truncated.npy", npy(f4 % "(4,)", 15))


# ---- IDX (Fashion-MNIST) ----------------------------------------------------------


def be32(*values):
    return b"".join(struct.pack(">I", v) for v in values)


def idx_input(images, labels):
    """The idx target's input: the images file's length, it, the labels file."""
    return le(len(images), 4) + images + labels


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


def idx_seeds(w):
    count = 3
    path = os.path.join(FASHION_MNIST, "train-images-idx3-ubyte.gz")
    if os.path.exists(path):
        with gzip.open(path) as f:
            images = f.read(16 + count * 784)
        with gzip.open(os.path.join(FASHION_MNIST, "train-labels-idx1-ubyte.gz")) as f:
            labels = f.read(8 + count)
        images = be32(2051, count, 28, 28) + images[16:]
        labels = be32(2049, count) + labels[8:]
    else:  # synthesized: the package dataset-fashion-mnist is absent
        rng = np.random.default_rng(0)
        images = be32(2051, count, 28, 28) + rng.integers(0, 256, count * 784, dtype=np.uint8).tobytes()
        labels = be32(2049, count) + bytes([9, 0, 3])
    w.put("corpus", "idx", "fashion_mnist_3.idx", idx_input(images, labels))
    w.put("corpus", "idx", "fashion_mnist_3_gz.idx", idx_input(gz(images), gz(labels)))
    w.put("corpus", "idx", "fashion_mnist_3_mixed.idx", idx_input(gz(images), labels))
    w.put("corpus", "idx", "tiny.idx", idx_input(be32(2051, 2, 1, 1) + b"ab", be32(2049, 2) + b"\x03\x07"))

    bad = lambda name, images, labels: w.put("regressions", "idx", name, idx_input(gz(images), gz(labels)))
    two_labels = be32(2049, 2) + b"\x03\x07"
    bad("size_2_64.idx", be32(2051, 1 << 31, 1 << 31, 4), two_labels)
    bad("size_47gb.idx", be32(2051, 60000, 28, 28000), be32(2049, 60000))
    bad("gzip_expands.idx", be32(2051, 1, 1, 1) + b"\0" * (4 << 20), be32(2049, 1) + b"\x01")
    bad("labels_2_31.idx", be32(2051, 2, 1, 1) + b"ab", be32(2049, 1 << 31))
    bad("image_0x28.idx", be32(2051, 2, 0, 28), two_labels)
    bad("labels_short.idx", be32(2051, 2, 1, 1) + b"ab", be32(2049, 2) + b"\x01")
    bad("label_10.idx", be32(2051, 2, 1, 1) + b"ab", be32(2049, 2) + b"\x03\x0a")
    bad("magic.idx", be32(2049, 2, 1, 1) + b"ab", two_labels)
    w.put("regressions", "idx", "gzip_corrupt.idx", idx_input(gz(be32(2051, 2, 1, 1) + b"ab")[:-6] + b"\xff" * 6,
                                                              two_labels))


# ---- Images -------------------------------------------------------------------------


def pattern(width, height):
    """An RGB image with edges, gradients and texture: something to encode."""
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), ((x // 4 + y // 4) % 2) * 200], -1)
    noise = np.random.default_rng(1).integers(0, 32, rgb.shape)
    return Image.fromarray(np.clip(rgb + noise, 0, 255).astype(np.uint8), "RGB")


def encoded(image, fmt, **kwargs):
    buffer = io.BytesIO()
    image.save(buffer, fmt, **kwargs)
    return buffer.getvalue()


def jpeg_segment(jpeg, marker):
    pos = 2
    while pos + 4 <= len(jpeg) and jpeg[pos] == 0xFF:
        if jpeg[pos + 1] == marker:
            return pos
        pos += 2 + (jpeg[pos + 2] << 8 | jpeg[pos + 3])
    raise ValueError("no JPEG segment FF %02X" % marker)


def jpeg_seeds(w):
    image = pattern(24, 16)
    w.put("corpus", "jpeg", "baseline.jpg", encoded(image, "JPEG", quality=85))
    w.put("corpus", "jpeg", "progressive.jpg", encoded(image, "JPEG", quality=85, progressive=True))
    w.put("corpus", "jpeg", "444_optimized.jpg", encoded(image, "JPEG", quality=95, subsampling=0, optimize=True))
    w.put("corpus", "jpeg", "gray.jpg", encoded(image.convert("L"), "JPEG"))
    w.put("corpus", "jpeg", "cmyk.jpg", encoded(image.convert("CMYK"), "JPEG"))
    w.put("corpus", "jpeg", "odd_size.jpg", encoded(pattern(13, 7), "JPEG", subsampling=2))

    bad = lambda name, data: w.put("regressions", "jpeg", name, data)
    bomb = bytearray(encoded(pattern(16, 16), "JPEG", quality=90))
    sof = jpeg_segment(bomb, 0xC0)
    bomb[sof + 5:sof + 9] = b"\xfd\xe8\xfd\xe8"  # 65000x65000
    bad("65000x65000.jpg", bytes(bomb))
    # 600 copies of the first scan of a progressive JPEG: over the 500-scan limit.
    jpeg = encoded(pattern(16, 16), "JPEG", quality=90, progressive=True)
    sos = jpeg_segment(jpeg, 0xDA)
    end = sos + 2 + (jpeg[sos + 2] << 8 | jpeg[sos + 3])
    while end + 1 < len(jpeg):
        if jpeg[end] == 0xFF and jpeg[end + 1] != 0 and not 0xD0 <= jpeg[end + 1] <= 0xD7:
            break
        end += 1
    bad("600_scans.jpg", jpeg[:end] + jpeg[sos:end] * 600 + jpeg[end:])
    bad("truncated.jpg", encoded(image, "JPEG")[:200])


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def gray_png(width, height, rows):
    ihdr = struct.pack(">II", width, height) + b"\x08\x00\x00\x00\x00"
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(rows)) +
            png_chunk(b"IEND", b""))


def png_seeds(w):
    image = pattern(12, 8)
    w.put("corpus", "png", "rgb.png", encoded(image, "PNG"))
    w.put("corpus", "png", "gray.png", encoded(image.convert("L"), "PNG"))
    rgba = image.convert("RGBA")
    rgba.putalpha(128)
    w.put("corpus", "png", "rgba.png", encoded(rgba, "PNG"))
    w.put("corpus", "png", "gray_alpha.png", encoded(image.convert("LA"), "PNG"))
    w.put("corpus", "png", "palette.png", encoded(image.convert("P", palette=Image.ADAPTIVE, colors=16), "PNG"))
    w.put("corpus", "png", "palette_transparent.png",
          encoded(image.convert("P", palette=Image.ADAPTIVE, colors=4), "PNG", transparency=0))
    w.put("corpus", "png", "bilevel.png", encoded(image.convert("1"), "PNG"))
    gray16 = Image.fromarray(np.arange(96, dtype=np.uint16).reshape(8, 12) * 600)  # mode I;16
    w.put("corpus", "png", "gray16.png", encoded(gray16, "PNG"))
    w.put("corpus", "png", "one_pixel.png", gray_png(1, 1, b"\x00\x4d"))

    bad = lambda name, data: w.put("regressions", "png", name, data)
    bad("65000x65000.png", gray_png(65000, 65000, b"\0" * 65001))
    bad("13378x13378.png", gray_png(13378, 13378, b""))
    bad("truncated.png", encoded(image, "PNG")[:60])
    bad("bad_crc.png", encoded(image, "PNG")[:-1] + b"\0")


# ---- tar ------------------------------------------------------------------------------


def tar_header(name, size_field, kind=b"0"):
    assert len(size_field) == 12
    header = bytearray(512)
    header[0:len(name)] = name.encode()
    header[124:136] = size_field
    header[156:157] = kind
    return bytes(header)


def octal_size(n):
    return b"%011o\0" % n


def padded(data):
    return data + b"\0" * (-len(data) % 512)


def tar_member(name, data, kind=b"0"):
    return tar_header(name, octal_size(len(data)), kind) + padded(data)


END = b"\0" * 1024


def tarred(members, fmt=tarfile.GNU_FORMAT):
    """A tar of (name, bytes) written by Python's tarfile, without the padding
    to 10 kB records."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
        end = tar.offset
    return buffer.getvalue()[:end] + END


def tar_seeds(w):
    png = encoded(pattern(6, 4), "PNG")
    jpg = encoded(pattern(8, 8), "JPEG", quality=70)
    w.put("corpus", "tar", "two_classes.tar", tarred([("cat/1.png", png), ("cat/2.jpg", jpg), ("dog/1.PNG", png),
                                                      ("dog/readme.txt", b"not an image")]))
    inner = tarred([("bird/1.png", png)])
    w.put("corpus", "tar", "tar_in_tar.tar", tarred([("shard-0.tar", inner), ("top.jpeg", jpg)]))
    w.put("corpus", "tar", "pax.tar", tarred([("a/" + "p" * 120 + ".png", png)], fmt=tarfile.PAX_FORMAT))
    w.put("corpus", "tar", "gnu_long_name.tar", tarred([("b/" + "g" * 120 + ".png", png)]))

    bad = lambda name, data: w.put("regressions", "tar", name, data)
    one_pixel = gray_png(1, 1, b"\x00\x4d")
    sizes = {
        "negative": b"\xff" * 12,
        "huge_base256": b"\x80" + b"\0" * 3 + (1 << 36).to_bytes(8, "big"),
        "huge_octal": octal_size(1 << 32),
        "base256_overflow": b"\x80" + b"\xff" * 11,
        "past_end": octal_size(513),
        "not_octal": b"0000000009\0\0",
    }
    for name, field in sizes.items():
        bad(name + ".tar", tar_header("c/x.png", field) + b"x" * 512)
    inner = tar_header("c/x.png", octal_size(1024)) + b"x" * 512
    bad("inner_past_end.tar", tar_member("inner.tar", inner) + END + END)
    for k, records in enumerate([b"abc path=x\n", b"1 path=x\n", b"99 path=x\n", b"12 path=xyz\t"]):
        bad("pax_malformed_%d.tar" % k, tar_member("pax", records, b"x") + tar_member("c/ok.png", one_pixel) + END)
    bad("long_name_past_end.tar", tar_header("././@LongLink", octal_size((1 << 20) + 1), b"L") + b"a" * 512 + END)
    # Found by libFuzzer: an empty GNU long name (its bytes have no storage).
    bad("long_name_empty.tar", tar_header("././@LongLink", octal_size(0), b"L") + tar_member("c/ok.png", one_pixel) + END)
    bad("bad_member.tar", tar_member("c/bad.png", one_pixel[:30]) + tar_member("c/ok.png", one_pixel) + END)


# ---- wds ------------------------------------------------------------------------------


def wds_seeds(w):
    """WebDataset shards: samples grouped by key, .cls targets and json sidecars
    with the "label" field the target also reads (fuzz_wds.cpp)."""
    png = encoded(pattern(6, 4), "PNG")
    jpg = encoded(pattern(8, 8), "JPEG", quality=70)
    w.put("corpus", "wds", "shard.tar", tarred([
        ("a/s0.png", png), ("a/s0.cls", b"3"), ("a/s0.json", b'{"label": 1, "key": "s0"}'),
        ("a/s1.jpg", jpg), ("a/s1.cls", b" 0\n"), ("a/s1.json", b'{"label": 4}'),
        ("a/s2.tar.gz.JPG", jpg), ("a/s2.cls", b"2"), ("a/s2.json", b'{"label": -1}'),
        ("a/s3.cls", b"1"), ("a/s3.json", b'{"label": 2}'),  # no image
        ("__meta__.txt", b"x"), ("a/s4.webp", b"RIFF"), ("a/s4.cls", b"x"),
    ]))
    w.put("corpus", "wds", "one_sample.tar", tarred([("k.png", png), ("k.cls", b"0"), ("k.json", b'{"label": 0}')]))


# ---- Configs and augmentation strings ---------------------------------------------------

TOML_SEEDS = {
    "flags.toml": """# a run's config, with flag names
model = "resnet18"
batch-size = 64
lr = 0.1
epochs = 3
sched = "cosine"
warmup-epochs = 0
opt = "sgd"
momentum = 0.9
weight-decay = 5e-5
aa = "rand-m9-mstd0.5-inc1"
mixup = 0.2
input-size = [1, 28, 28]
mean = [0.286]
std = [0.353]
model-kwargs = { drop_rate = 0.1, global_pool = "avg" }
""",
    "dests.toml": """# timm-train configuration. Keys are dest names.
batch_size = 128
validation_batch_size = 256
lr_base = 0.1
lr_base_size = 256
decay_milestones = [90, 180, 270]
smoothing = 0.1
amp = true
amp_dtype = "bfloat16"
clip_grad = 1.0
clip_mode = "agc"
model_ema = true
model_ema_decay = 0.9998
# pretrained_path = None
opt_kwargs = ["eps=1e-8", "foreach=True"]
color_jitter = 0.4
train_split = "train"
dataset = "fashion-mnist"
""",
    "kinds.toml": """lr = 1
epochs = 0x10
smoothing = 1e-1
scale = [0.08, 1]
ratio = [0.75, 1.3333333333333333]
crop-pct = inf
model = 'resnet50'
amp = false
""",
}

COMMAND_LINE_SEEDS = {
    "args.txt": "--model resnet18 -b 64 --lr 0.1 --epochs 2 --sched cosine --warmup-epochs 0",
    "short_forms.txt": "-b128 -j4 -vb 256 --opt=adamw --weight-decay=0.05 --amp --amp-dtype bfloat16",
    "abbreviations.txt": "--jsd --aug-splits 3 --aa augmix-m3-w3-d2 --reprob 0.25 --remode pixel --recount 2",
    "lists.txt": "--input-size 3 224 224 --mean 0.5 0.5 0.5 --std 0.5 0.5 0.5 --decay-milestones 30 60 90",
    "kwargs.txt": "--model-kwargs drop_rate=0.1 drop_path_rate=0.05 --opt-kwargs eps=1e-8 --torchcompile",
    "help.txt": "--help",
    "list_models.txt": "--list-models resnet*",
    "config_flag.txt": "-c missing.toml --epochs 1",
    "positional.txt": "data --data-dir other --dataset fashion-mnist --train-num-samples 100",
}


def config_seeds(w):
    for name, text in {**TOML_SEEDS, **COMMAND_LINE_SEEDS}.items():
        w.put("corpus", "config", name, text.encode())
    bad = lambda name, text: w.put("regressions", "config", name, text if isinstance(text, bytes) else text.encode())
    bad("deep_arrays.toml", "scale = " + "[" * 5000 + "]" * 5000)
    bad("deep_tables.toml", "model-kwargs = " + "{a=" * 2000 + "1" + "}" * 2000)
    bad("unknown_key.toml", "batch-sise = 64\n")
    bad("wrong_type.toml", "batch-size = \"64\"\n")
    bad("same_value_twice.toml", "batch-size = 64\nbatch_size = 32\n")
    bad("action_key.toml", "help = true\n")
    bad("huge_int.toml", "epochs = 99999999999999999999999\n")
    bad("bad_utf8.toml", b"model = \"\xff\xfe\"\n")
    bad("nested_kwargs.toml", "model-kwargs = { a = { b = 1 } }\n")
    bad("input_size_count.toml", "input-size = [3, 224]\n")
    bad("choices.toml", "clip-mode = \"sideways\"\n")
    bad("many_values.txt", "--input-size " + "1 " * 5000)
    bad("bad_numbers.txt", "-b 1e999 --lr nan --epochs 99999999999999999999 --mean inf -inf")
    bad("dashes.txt", "-- --- -=- --=x -b= --lr= - -bb")


AUG_SEEDS = [
    "rand-m9-n2-mstd0.5", "rand-m9-mstd0.5-inc1", "rand-m7-n4-mstd0.5-mmax10-inc1-p0.5", "rand-m10-n3-tweights",
    "rand-m5-mstdinf", "original", "originalr", "v0", "v0r", "3a", "v0-mstd0.5", "augmix-m3-w3-d2",
    "augmix-m5-w4-a1-b1-mstd0.5", "augmix-m3-w2-d1-b0",
]
AUG_REGRESSIONS = {
    "n_huge": "rand-m9-n999999999999", "augmix_huge": "augmix-w99999999999-d99999999999",
    "m_huge": "rand-m1e308-mstd1e308", "m_overflow": "rand-m1e400", "m_nan": "rand-mnan-mstdnan", "n_negative": "rand-n-1",
    "empty_sections": "rand----", "policy": "v9", "augmix_alpha": "augmix-a0", "mmax": "rand-m9-mmax-5-inc1",
    "digits": "rand-m" + "9" * 400, "empty": "",
}


def aug_seeds(w):
    for k, text in enumerate(AUG_SEEDS):
        w.put("corpus", "aug_config", "%02d.txt" % k, text.encode())
    for name, text in AUG_REGRESSIONS.items():
        w.put("regressions", "aug_config", name + ".txt", text.encode())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE, help="the folder that gets corpus/ and regressions/ (default: here)")
    args = parser.parse_args()
    for kind in ("corpus", "regressions"):
        shutil.rmtree(os.path.join(args.out, kind), ignore_errors=True)
    w = Writer(args.out)
    for make in (pth, safetensors_seeds, npy_seeds, idx_seeds, jpeg_seeds, png_seeds, tar_seeds, wds_seeds,
                 config_seeds, aug_seeds):
        make(w)
    print("wrote %d bytes of seeds and regressions under %s" % (w.total, args.out))


if __name__ == "__main__":
    main()

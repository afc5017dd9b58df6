// Hostile .pth and .npy files, each crafted byte by byte here: every one must
// be refused with a timm::Error naming the file and the problem, never a
// crash, a hang, a huge allocation or another exception type (a test fails on
// any exception that is not a timm::Error). A normal file, with a deflated
// data.pkl, still reads.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/io/atomic_file.hpp"
#include "timm/io/npy.hpp"
#include "timm/io/torch_file.hpp"

// Last: c10/util/Logging.h defines a CHECK macro that doctest must override.
#include <doctest/doctest.h>

namespace test_hostile_io {

using namespace std::string_literals;  // opcodes with NUL bytes: "q\x00"s

namespace {

using timm::test::TempDir;

// The message of the timm::Error that `read` throws; "<no error>" if none.
std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const timm::Error& e) {
    return e.what();
  }
  return "<no error>";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Checks that reading `path` with `read` fails naming the file and `problem`.
void check_refused(const std::filesystem::path& path, void (*read)(const std::filesystem::path&),
                   const std::string& problem) {
  const std::string message = error_of([&] { read(path); });
  CAPTURE(message);
  CHECK(contains(message, path.string()));
  CHECK(contains(message, problem));
}

void read_pth(const std::filesystem::path& path) { timm::read_torch_file(path); }
void read_npy_file(const std::filesystem::path& path) { timm::read_npy(path); }

std::string le(uint64_t value, int bytes) {
  std::string out;
  for (int k = 0; k < bytes; ++k) out += static_cast<char>((value >> (8 * k)) & 0xff);
  return out;
}

// --- Pickles (protocol 2), as torch.save writes them.

const std::string kProto = "\x80\x02";

std::string str(const std::string& s) { return "X" + le(s.size(), 4) + s; }
std::string global(const std::string& module, const std::string& name) { return "c" + module + "\n" + name + "\n"; }
std::string long8(int64_t v) { return "\x8a\x08" + le(static_cast<uint64_t>(v), 8); }

std::string int_tuple(const std::vector<int64_t>& values) {
  std::string out = "(";
  for (const int64_t v : values) out += long8(v);
  return out + "t";
}

// ('storage', torch.FloatStorage, key, 'cpu', numel), loaded (BINPERSID).
std::string storage(const std::string& key, int64_t numel) {
  return "(" + str("storage") + global("torch", "FloatStorage") + str(key) + str("cpu") + long8(numel) + "tQ";
}

// _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()).
std::string tensor(const std::string& key, int64_t numel, int64_t offset, const std::vector<int64_t>& size,
                   const std::vector<int64_t>& stride) {
  return global("torch._utils", "_rebuild_tensor_v2") + "(" + storage(key, numel) + long8(offset) + int_tuple(size) +
         int_tuple(stride) + "\x89" + global("collections", "OrderedDict") + ")R" + "tR";
}

// A torch.save-like archive written by LibTorch's own zip writer: `pickle` as
// data.pkl (deflated if `compress`), `storages` as data/<key>.
void write_pth(const std::filesystem::path& path, const std::string& pickle,
               const std::vector<std::pair<std::string, std::string>>& storages = {}, bool compress = false) {
  caffe2::serialize::PyTorchStreamWriter writer(path.string());
  writer.writeRecord("data.pkl", pickle.data(), pickle.size(), compress);
  for (const auto& [key, bytes] : storages) writer.writeRecord("data/" + key, bytes.data(), bytes.size());
  writer.writeEndOfFile();
}

std::string floats(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// --- Zip archives written field by field, to lie about sizes.

uint32_t crc32(const std::string& bytes) {
  uint32_t crc = 0xffffffff;
  for (const char c : bytes) {
    crc ^= static_cast<uint8_t>(c);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
  }
  return ~crc;
}

struct ZipEntry {
  std::string name;
  std::string data;                         // the bytes stored (compressed ones if method is 8)
  uint16_t method = 0;                      // 0 stored, 8 deflated
  std::optional<uint64_t> declared = {};    // uncompressed size; data.size() by default
  std::optional<uint64_t> compressed = {};  // compressed size; data.size() by default
  int shares = -1;                          // the index of an earlier entry whose local header and bytes it shares
};

// A zip archive of `entries`, in order. Sizes from 0xffffffff up are written
// as zip64 fields of the central directory.
std::string zip(const std::vector<ZipEntry>& entries) {
  std::string out;
  std::vector<uint32_t> offsets;
  for (const auto& e : entries) {
    offsets.push_back(e.shares >= 0 ? offsets[e.shares] : static_cast<uint32_t>(out.size()));
    if (e.shares >= 0) continue;
    out += le(0x04034b50, 4) + le(20, 2) + le(0, 2) + le(e.method, 2) + le(0, 4) + le(crc32(e.data), 4) +
           le(e.data.size(), 4) + le(e.data.size(), 4) + le(e.name.size(), 2) + le(0, 2) + e.name + e.data;
  }
  const size_t directory = out.size();
  for (size_t k = 0; k < entries.size(); ++k) {
    const auto& e = entries[k];
    const uint64_t size = e.declared.value_or(e.data.size());
    const uint64_t compressed = e.compressed.value_or(e.data.size());
    std::string extra;
    if (size >= 0xffffffff) extra += le(size, 8);
    if (compressed >= 0xffffffff) extra += le(compressed, 8);
    if (!extra.empty()) extra = le(1, 2) + le(extra.size(), 2) + extra;
    out += le(0x02014b50, 4) + le(45, 2) + le(45, 2) + le(0, 2) + le(e.method, 2) + le(0, 4) + le(crc32(e.data), 4) +
           le(std::min<uint64_t>(compressed, 0xffffffff), 4) + le(std::min<uint64_t>(size, 0xffffffff), 4) +
           le(e.name.size(), 2) + le(extra.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(offsets[k], 4) +
           e.name + extra;
  }
  const size_t directory_size = out.size() - directory;
  out += le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(entries.size(), 2) + le(entries.size(), 2) +
         le(directory_size, 4) + le(directory, 4) + le(0, 2);
  return out;
}

// The entries every archive needs besides the one under test.
const ZipEntry kVersion{"archive/version", "3\n"};
const ZipEntry kEmptyDict{"archive/data.pkl", kProto + "}."};

// --- .npy files.

// A .npy file of `version` (1 or 2) with `header` as its dict and `payload` bytes after it.
std::string npy(const std::string& header, size_t payload, int version = 1) {
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(version) + '\0';
  out += le(header.size(), version == 1 ? 2 : 4);
  return out + header + std::string(payload, '\0');
}

}  // namespace

TEST_CASE("a torch file written by LibTorch's zip writer reads, with data.pkl stored or deflated") {
  TempDir dir;
  const std::string pickle = kProto + "}(" + str("w") + tensor("0", 6, 0, {2, 3}, {3, 1}) + "u.";
  for (const bool compress : {false, true}) {
    CAPTURE(compress);
    const auto path = dir / "ok.pth";
    write_pth(path, pickle, {{"0", floats({1, 2, 3, 4, 5, 6})}}, compress);
    const timm::TorchFile file = timm::read_torch_file(path);
    REQUIRE(file.tensors.size() == 1);
    CHECK(file.tensors[0].first == "w");
    CHECK(at::equal(file.tensors[0].second, at::arange(1, 7, at::kFloat).reshape({2, 3})));
  }
}

TEST_CASE("a pickle of 100000 nested tuples is refused at the depth limit, not by a stack overflow") {
  TempDir dir;
  const auto path = dir / "deep.pth";
  write_pth(path, kProto + ")" + std::string(100000, '\x85') + ".");
  check_refused(path, read_pth, "nested deeper than 1000 levels");
}

TEST_CASE("a pickle whose containers hold each other (a cycle) is refused") {
  TempDir dir;
  const auto self = dir / "self.pth";
  write_pth(self, kProto + "]2a.");  // l = []; l.append(l)
  check_refused(self, read_pth, "holds itself");
  // a = []; b = []; a.append(b); b.append(a)
  const auto pair = dir / "pair.pth";
  write_pth(pair, kProto + "]q\x00]q\x01"s + "ah\x01h\x00"s + "a.");
  check_refused(pair, read_pth, "already inside another");
}

TEST_CASE("a pickle that fills its stack without bound is refused") {
  TempDir dir;
  const auto path = dir / "stack.pth";
  write_pth(path, kProto + "N" + std::string((size_t{1} << 22) + 1, '2') + ".");  // DUP, 4M times
  check_refused(path, read_pth, "values on the stack");
}

TEST_CASE("a storage whose numel * element size overflows is refused before any allocation") {
  TempDir dir;
  const auto path = dir / "numel.pth";
  write_pth(path, kProto + storage("0", int64_t{1} << 62) + ".", {{"0", floats({1, 2})}});
  check_refused(path, read_pth, "holds 8 bytes, fewer than 4611686018427387904 elements of torch.FloatStorage");
}

TEST_CASE("tensor views outside their storage or larger than the file are refused") {
  TempDir dir;
  const auto outside = dir / "offset.pth";
  write_pth(outside, kProto + tensor("0", 2, 5, {2}, {1}) + ".", {{"0", floats({1, 2})}});
  check_refused(outside, read_pth, "lies outside its storage of 2 elements");
  // 2^40 copies of one float through a zero stride: 4 TiB to whoever copies it.
  const auto expanded = dir / "expand.pth";
  write_pth(expanded, kProto + tensor("0", 1, 0, {int64_t{1} << 40}, {0}) + ".", {{"0", floats({1})}});
  check_refused(expanded, read_pth, "more than the file can describe");
  const auto overflow = dir / "overflow.pth";
  write_pth(overflow, kProto + tensor("0", 1, 0, {0, int64_t{1} << 62, 8}, {0, 0, 0}) + ".", {{"0", floats({1})}});
  check_refused(overflow, read_pth, "its size overflows");
}

TEST_CASE("one long key repeated through the memo cannot make the result huge") {
  TempDir dir;
  const auto path = dir / "repeat.pth";
  // d = {key: tensor} with a 100 kB key; the top-level dict maps key -> d 3000 times (4 bytes each).
  std::string pickle = kProto + str(std::string(100000, 'k')) + "q\x03" + "0";
  pickle += "}q\x01(h\x03" + tensor("0", 1, 0, {1}, {1}) + "u0";
  pickle += "}(";
  for (int k = 0; k < 3000; ++k) pickle += "h\x03h\x01";
  pickle += "u.";
  write_pth(path, pickle, {{"0", floats({1})}});
  check_refused(path, read_pth, "its dicts repeat more than");
}

TEST_CASE("a global name longer than any Python name is refused") {
  TempDir dir;
  const auto path = dir / "global.pth";
  write_pth(path, kProto + global(std::string(5000, 'm'), "x") + ".");
  check_refused(path, read_pth, "global name of 5002 bytes");
}

TEST_CASE("zip entries declaring more than the file holds are refused before the zip reader allocates") {
  TempDir dir;
  constexpr uint64_t kTerabyte = uint64_t{1} << 40;
  const auto write = [&](const std::string& name, const std::vector<ZipEntry>& entries) {
    timm::write_file_atomically(dir / name, zip(entries));
    return dir / name;
  };
  // Stored: its 1 TB would have to lie inside the file.
  ZipEntry stored = kEmptyDict;
  stored.declared = kTerabyte;
  stored.compressed = kTerabyte;
  check_refused(write("stored.pth", {kVersion, stored}), read_pth, "lies outside the file");
  // Stored, sizes differing.
  ZipEntry differing = kEmptyDict;
  differing.declared = kTerabyte;
  check_refused(write("differing.pth", {kVersion, differing}), read_pth, "declares 1099511627776");
  // Deflated "version", which LibTorch's reader allocates in its constructor.
  ZipEntry deflated = kVersion;
  deflated.method = 8;
  deflated.declared = kTerabyte;
  check_refused(write("deflated.pth", {deflated, kEmptyDict}), read_pth, "more than deflate can expand");
  // 200 entries sharing one stored 10 kB body: 2 MB declared by a 22 kB file.
  std::vector<ZipEntry> overlapping = {kVersion, kEmptyDict, {"archive/data/0", std::string(10000, 'x')}};
  for (int k = 1; k < 200; ++k) {
    ZipEntry alias{"archive/data/" + std::to_string(k), std::string(10000, 'x')};
    alias.shares = 2;
    overlapping.push_back(alias);
  }
  check_refused(write("overlap.pth", overlapping), read_pth, "bytes in all");
  // An unknown compression method.
  ZipEntry bzip2 = kEmptyDict;
  bzip2.method = 12;
  check_refused(write("bzip2.pth", {kVersion, bzip2}), read_pth, "compression method 12");
}

TEST_CASE("broken zip structures and a bad version entry give an Error, never another exception") {
  TempDir dir;
  timm::write_file_atomically(dir / "junk.pth", "PK\x03\x04" + std::string(100, '\x07'));
  check_refused(dir / "junk.pth", read_pth, "no end of central directory record");
  std::string cut = zip({kVersion, kEmptyDict});
  cut.erase(cut.size() - 30, 8);  // the central directory shrinks under the end record
  timm::write_file_atomically(dir / "cut.pth", cut);
  check_refused(dir / "cut.pth", read_pth, "");
  // std::stoull of the version throws std::out_of_range inside LibTorch's reader.
  timm::write_file_atomically(dir / "version.pth", zip({{"archive/version", "99999999999999999999999\n"}, kEmptyDict}));
  check_refused(dir / "version.pth", read_pth, "");
  timm::write_file_atomically(dir / "text_version.pth", zip({{"archive/version", "three\n"}, kEmptyDict}));
  check_refused(dir / "text_version.pth", read_pth, "");
}

TEST_CASE("hostile npy headers and shapes are refused before any allocation") {
  TempDir dir;
  const auto write = [&](const std::string& name, const std::string& bytes) {
    timm::write_file_atomically(dir / name, bytes);
    return dir / name;
  };
  // A 10 MB version 2 header (numpy's own limit for version 1 is 64 kB).
  const std::string huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }" + std::string(10 << 20, ' ');
  check_refused(write("header.npy", npy(huge, 4, 2)), read_npy_file, "header of 10485817 bytes is longer than");
  // 2^40 elements claimed by a file of about 200 bytes.
  check_refused(write("numel.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", 120)),
                read_npy_file, "needs 4398046511104");
  check_refused(write("overflow.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
                                          "4294967296), }",
                                          8)),
                read_npy_file, "bad shape");
  check_refused(write("zero.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, "
                                      "4611686018427387904), }",
                                      0)),
                read_npy_file, "bad shape");
  check_refused(write("word.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 8)), read_npy_file,
                "bad shape");
  check_refused(write("spaces.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 24)),
                read_npy_file, "bad shape");
  check_refused(write("key.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8)),
                read_npy_file, "unexpected key 'x'");
  check_refused(write("twice.npy", npy("{'descr': '<f4', 'shape': (1,), 'fortran_order': False, 'shape': (2,)}", 8)),
                read_npy_file, "repeats the key 'shape'");
  check_refused(write("after.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", 8)),
                read_npy_file, "text after its dict");
  check_refused(write("order.npy", npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", 8)), read_npy_file,
                "bad fortran_order");
  check_refused(write("descr.npy", npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", 8)),
                read_npy_file, "unsupported dtype");
  check_refused(write("open.npy", npy("{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", 8)), read_npy_file,
                "no valid 'descr'");
}

TEST_CASE("a version 2 npy header written by hand reads") {
  TempDir dir;
  const auto path = dir / "v2.npy";
  std::string bytes = npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", 0, 2);
  bytes += le(7, 4) + le(static_cast<uint32_t>(-3), 4);
  timm::write_file_atomically(path, bytes);
  CHECK(at::equal(timm::read_npy(path), at::tensor({7, -3}, at::kInt)));
}

}  // namespace test_hostile_io

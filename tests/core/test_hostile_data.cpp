// Hostile input to the data readers (issue 17): tar headers with negative,
// huge or overflowing sizes and members past the end, images whose headers
// declare 65000x65000 pixels, IDX files whose sizes overflow or whose gzip
// expands without bound, folder trees with symlink cycles. Each is a
// timm::Error naming the file and what was wrong (for an image in the
// loader, a counted skip), found before anything large is allocated. A
// symlink diamond (no cycle, 2^N paths) is walked once per real folder.
#include <sys/stat.h>
#include <turbojpeg.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "png_bytes.hpp"
#include "test_support.hpp"
#include "timm/base/error.hpp"
#include "timm/data/dataset.hpp"
#include "timm/data/image.hpp"
#include "timm/data/loader.hpp"

#include <doctest/doctest.h>

namespace test_hostile_data {

namespace fs = std::filesystem;
using namespace timm;
using timm::test::put_be32;

namespace {

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::uint8_t> as_bytes(const std::string& s) { return {s.begin(), s.end()}; }

// ---- tar -------------------------------------------------------------------

// A 512-byte tar header; `size_field` is the raw 12-byte size field.
std::string tar_header(const std::string& name, const std::string& size_field, char type = '0') {
  REQUIRE(size_field.size() == 12);
  std::string h(512, '\0');
  h.replace(0, name.size(), name);
  h.replace(124, 12, size_field);
  h[156] = type;
  return h;
}

std::string octal_size(std::uint64_t n) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%011llo", static_cast<unsigned long long>(n));
  return std::string(digits, 11) + '\0';
}

// GNU base-256: a marker byte, then 11 big-endian bytes.
std::string base256_size(std::uint8_t first, std::uint64_t low) {
  std::string f(12, '\0');
  f[0] = static_cast<char>(first);
  for (int i = 0; i < 8; ++i) f[11 - i] = static_cast<char>((low >> (8 * i)) & 0xFF);
  return f;
}

std::string padded(std::string data) {
  data.resize((data.size() + 511) / 512 * 512, '\0');
  return data;
}

// A member with its data, padded to whole blocks.
std::string tar_member(const std::string& name, const std::string& data, char type = '0') {
  return tar_header(name, octal_size(data.size()), type) + padded(data);
}

const std::string kEndOfArchive(1024, '\0');

// ---- PNG and JPEG ------------------------------------------------------------

// An 8-bit grayscale PNG declaring width x height whose IDAT holds `rows`
// (a filter byte and the pixels per row; fewer rows than declared make a
// truncated image).
std::string gray_png(std::uint32_t width, std::uint32_t height, const std::string& rows) {
  return timm::test::png_bytes(width, height, /*color_type=*/0, rows);
}

// 1x1, gray 0x4d.
std::string one_pixel_png() { return gray_png(1, 1, std::string("\x00\x4d", 2)); }

// A 16x16 RGB JPEG from TurboJPEG.
std::string small_jpeg(int flags) {
  std::vector<unsigned char> rgb(16 * 16 * 3);
  for (std::size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<unsigned char>(i * 13);
  tjhandle tj = tjInitCompress();
  REQUIRE(tj != nullptr);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj, rgb.data(), 16, 0, 16, TJPF_RGB, &buffer, &size, TJSAMP_420, 90, flags);
  const std::string jpeg = rc == 0 ? std::string(reinterpret_cast<char*>(buffer), size) : std::string();
  tjFree(buffer);
  tjDestroy(tj);
  REQUIRE(rc == 0);
  return jpeg;
}

// The offset of the first marker segment `marker` (FF <marker>) before the
// image data, walking the segments from SOI.
std::size_t jpeg_segment(const std::string& jpeg, unsigned char marker) {
  std::size_t pos = 2;
  while (pos + 4 <= jpeg.size() && static_cast<unsigned char>(jpeg[pos]) == 0xFF) {
    if (static_cast<unsigned char>(jpeg[pos + 1]) == marker) return pos;
    pos += 2 + (static_cast<unsigned char>(jpeg[pos + 2]) << 8 | static_cast<unsigned char>(jpeg[pos + 3]));
  }
  FAIL("no JPEG segment FF " << int(marker));
  return 0;
}

// ---- IDX -------------------------------------------------------------------

void write_gz(const fs::path& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(file) == Z_OK);
}

std::string idx_header(std::uint32_t magic, std::initializer_list<std::uint32_t> dims) {
  std::string out;
  put_be32(out, magic);
  for (std::uint32_t d : dims) put_be32(out, d);
  return out;
}

// Gzipped Fashion-MNIST training files in `dir`.
void write_idx(const fs::path& dir, const std::string& images, const std::string& labels) {
  write_gz(dir / "train-images-idx3-ubyte.gz", images);
  write_gz(dir / "train-labels-idx1-ubyte.gz", labels);
}

}  // namespace

TEST_CASE("tar headers with bad sizes are errors naming the tar") {
  test::TempDir dir;
  // The crafted layout is sound: a good member is listed and decodes.
  write_file(dir / "good.tar", tar_member("c/ok.png", one_pixel_png()) + kEndOfArchive);
  auto good = make_image_in_tar(dir / "good.tar", 3);
  REQUIRE(good->size() == 1);
  CHECK(good->image(0).pixels[0] == 0x4d);

  struct Case {
    const char* file;
    std::string size_field;
    const char* says;
  };
  const Case cases[] = {
      // Negative base-256: the header walk went backwards forever.
      {"negative.tar", std::string(12, '\xFF'), "negative or oversized base-256 member size"},
      // 64 GiB in base-256, then in octal: an allocation the file cannot back.
      {"huge.tar", base256_size(0x80, std::uint64_t{1} << 36), "declares 68719476736 bytes; only 512 remain"},
      {"huge_octal.tar", octal_size(std::uint64_t{1} << 32), "declares 4294967296 bytes; only 512 remain"},
      // 11 bytes of 0xFF do not fit in 63 bits.
      {"overflow.tar", std::string("\x80", 1) + std::string(11, '\xFF'), "overflows"},
      // A size past the end of the archive by one byte.
      {"past_end.tar", octal_size(513), "declares 513 bytes; only 512 remain"},
      {"not_octal.tar", std::string("0000000009\0\0", 12), "not an octal number"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.file);
    const fs::path path = dir / c.file;
    write_file(path, tar_header("c/x.png", c.size_field) + std::string(512, 'x'));
    CHECK_THROWS_WITH_AS(make_image_in_tar(path, 3), doctest::Contains(path.c_str()), Error);
    CHECK_THROWS_WITH_AS(make_image_in_tar(path, 3), doctest::Contains(c.says), Error);
  }
}

TEST_CASE("a member of a tar inside a tar may not reach past the inner tar") {
  test::TempDir dir;
  // inner.tar's one member declares 1024 bytes; inner.tar holds 512 of them,
  // and the outer file has more bytes after it.
  const std::string inner = tar_header("c/x.png", octal_size(1024)) + std::string(512, 'x');
  write_file(dir / "outer.tar", tar_member("inner.tar", inner) + kEndOfArchive + kEndOfArchive);
  CHECK_THROWS_WITH_AS(make_image_in_tar(dir / "outer.tar", 3),
                       doctest::Contains("outer.tar': corrupt header at byte 512: member 'c/x.png' declares 1024 "
                                         "bytes; only 512 remain in the archive"),
                       Error);
}

TEST_CASE("malformed pax records and oversized long names are errors, not std exceptions") {
  test::TempDir dir;
  for (const char* records : {"abc path=x\n", "1 path=x\n", "99 path=x\n", "12 path=xyz\t"}) {
    CAPTURE(records);
    write_file(dir / "pax.tar",
               tar_member("pax", records, 'x') + tar_member("c/ok.png", one_pixel_png()) + kEndOfArchive);
    CHECK_THROWS_WITH_AS(make_image_in_tar(dir / "pax.tar", 3), doctest::Contains("malformed pax record"), Error);
  }
  // A well-formed pax path renames the next member.
  write_file(dir / "pax.tar",
             tar_member("pax", "18 path=d/pax.png\n", 'x') + tar_member("c/ok.png", one_pixel_png()) + kEndOfArchive);
  CHECK(make_image_in_tar(dir / "pax.tar", 3)->describe(0) == (dir / "pax.tar").string() + ":d/pax.png");

  // A GNU long name over 1 MiB: a real file, refused before it is read.
  write_file(dir / "long.tar", tar_member("././@LongLink", std::string((1 << 20) + 1, 'a'), 'L') +
                                   tar_member("c/ok.png", one_pixel_png()) + kEndOfArchive);
  CHECK_THROWS_WITH_AS(make_image_in_tar(dir / "long.tar", 3),
                       doctest::Contains("GNU long name of 1048577 bytes; expected at most 1048576"), Error);
}

TEST_CASE("a PNG declaring 65000x65000 pixels is refused before decoding") {
  CHECK(decode_image(as_bytes(one_pixel_png()), "one.png", 1).pixels[0] == 0x4d);
  const std::string bomb = gray_png(65000, 65000, std::string(65001, '\0'));
  CHECK(bomb.size() < 1000);
  CHECK_THROWS_WITH_AS(decode_image(as_bytes(bomb), "dir/bomb.png", 3),
                       "image 'dir/bomb.png': 65000x65000 (4225000000 pixels) exceeds the limit of 178956970 pixels; "
                       "refused as a possible decompression bomb, as PIL does",
                       Error);
  // Just over twice the limit is refused (13377x13377 would not be);
  // between the limit and twice it PIL only warns: this truncated 9460x9460
  // (89491600 pixels) then fails as a corrupt PNG, having allocated its 90 MB.
  CHECK_THROWS_WITH_AS(decode_image(as_bytes(gray_png(13378, 13378, "")), "big.png", 1),
                       doctest::Contains("(178970884 pixels) exceeds the limit"), Error);
  try {
    decode_image(as_bytes(gray_png(9460, 9460, std::string(9461, '\0'))), "big.png", 1);
    FAIL("a truncated PNG decoded");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("corrupt PNG") != std::string::npos);
    CHECK(std::string(e.what()).find("decompression bomb") == std::string::npos);
  }
}

TEST_CASE("a JPEG whose frame header declares 65000x65000 pixels is refused before decoding") {
  std::string jpeg = small_jpeg(0);
  CHECK(decode_image(as_bytes(jpeg), "small.jpg", 3).width == 16);
  // SOF0: FF C0, length (2), precision (1), height (2), width (2).
  const std::size_t sof = jpeg_segment(jpeg, 0xC0);
  // Byte by byte: string::replace here trips g++ 12's -Wstringop-overflow.
  for (std::size_t at : {sof + 5, sof + 7}) {
    jpeg[at] = '\xFD';  // 65000, big-endian
    jpeg[at + 1] = '\xE8';
  }
  const std::vector<std::uint8_t> bomb = as_bytes(jpeg);
  const auto dims = jpeg_dimensions(bomb);
  REQUIRE(dims.has_value());
  CHECK(dims->first == 65000);
  CHECK(dims->second == 65000);
  CHECK_THROWS_WITH_AS(decode_image(bomb, "dir/bomb.jpg", 3), doctest::Contains("'dir/bomb.jpg': 65000x65000"), Error);
  CHECK_THROWS_WITH_AS(decode_image(bomb, "dir/bomb.jpg", 3), doctest::Contains("decompression bomb"), Error);
  // The limit is on the declared size, as PIL checks it at open, before any
  // draft: the DCT-scaled decode refuses it too.
  CHECK_THROWS_WITH_AS(decode_jpeg_scaled(bomb, "dir/bomb.jpg", 3, 8), doctest::Contains("decompression bomb"), Error);
}

TEST_CASE("a bad JPEG header leaves the thread's decoder usable for the next file") {
  const std::string good = small_jpeg(0);
  const std::vector<std::uint8_t> garbage = as_bytes(std::string("\xFF\xD8\xFF", 3) + std::string(200, 'x'));
  // Twice in a row, as the --jpeg-dct-scale path reads a header and then decodes.
  for (int i = 0; i < 2; ++i) {
    CHECK_FALSE(jpeg_dimensions(garbage).has_value());
    CHECK_THROWS_WITH_AS(decode_image(garbage, "garbage.jpg", 3), doctest::Contains("corrupt JPEG header"), Error);
  }
  const auto dims = jpeg_dimensions(as_bytes(good));
  REQUIRE(dims.has_value());
  CHECK(dims->second == 16);
  CHECK(decode_image(as_bytes(good), "small.jpg", 3).width == 16);
  CHECK(decode_jpeg_scaled(as_bytes(good), "small.jpg", 3, 2).width == 8);
}

TEST_CASE("a progressive JPEG of more than 500 scans is refused") {
  std::string jpeg = small_jpeg(TJFLAG_PROGRESSIVE);
  CHECK(decode_image(as_bytes(jpeg), "progressive.jpg", 3).width == 16);
  // Repeat the first scan (its SOS segment and entropy-coded data, up to the
  // next marker that is not a stuffed 00 or a restart): libjpeg only warns
  // about the repeated progression.
  const std::size_t sos = jpeg_segment(jpeg, 0xDA);
  std::size_t end =
      sos + 2 + (static_cast<unsigned char>(jpeg[sos + 2]) << 8 | static_cast<unsigned char>(jpeg[sos + 3]));
  while (end + 1 < jpeg.size()) {
    const auto next = static_cast<unsigned char>(jpeg[end + 1]);
    if (static_cast<unsigned char>(jpeg[end]) == 0xFF && next != 0x00 && (next < 0xD0 || next > 0xD7)) break;
    ++end;
  }
  const std::string scan = jpeg.substr(sos, end - sos);
  std::string repeated;
  for (int i = 0; i < 600; ++i) repeated += scan;
  jpeg.insert(end, repeated);
  CHECK_THROWS_WITH_AS(decode_image(as_bytes(jpeg), "scans.jpg", 3), doctest::Contains("500 scans"), Error);
}

TEST_CASE("the loader skips and counts an image over the pixel limit") {
  test::TempDir dir;
  fs::create_directories(dir / "a");
  write_file(dir / "a" / "bomb.png", gray_png(65000, 65000, std::string(65001, '\0')));
  write_file(dir / "a" / "good.png", one_pixel_png());
  std::shared_ptr<const Dataset> ds = make_image_folder(dir.path(), 3);
  REQUIRE(ds->size() == 2);
  REQUIRE(ds->describe(0) == (dir / "a" / "bomb.png").string());
  LoaderOptions opt;
  opt.batch_size = 2;
  opt.num_workers = 0;
  Loader loader(ds, make_local_sampler(ds->size(), false, 0), TransformPipeline{}, opt);
  loader.start_epoch(0);
  const auto batch = loader.next();
  REQUIRE(batch);
  CHECK(batch->images.size(0) == 2);  // good.png in the bomb's place
  CHECK(loader.skipped_samples() == 1);
}

TEST_CASE("IDX files whose sizes overflow, exceed the limit or disagree are errors naming the file") {
  test::TempDir dir;
  const fs::path images = dir / "train-images-idx3-ubyte.gz";
  const fs::path labels = dir / "train-labels-idx1-ubyte.gz";
  const std::string two_labels = idx_header(2049, {2}) + std::string("\x03\x07", 2);
  // The crafted files are sound: two 1x1 images load.
  write_idx(dir.path(), idx_header(2051, {2, 1, 1}) + "ab", two_labels);
  auto ds = make_fashion_mnist(dir.path(), "train", 1);
  REQUIRE(ds->size() == 2);
  CHECK(ds->target(1) == 7);
  CHECK(ds->image(1).pixels[0] == 'b');

  // 2^31 * 2^31 * 4 = 2^64 bytes: wrapped to 0, the old check passed a 16-byte
  // file and image() read past it.
  write_idx(dir.path(), idx_header(2051, {1u << 31, 1u << 31, 4}), two_labels);
  CHECK_THROWS_WITH_AS(make_fashion_mnist(dir.path(), "train", 1),
                       doctest::Contains((images.string() + "': declares 2147483648 images of 2147483648x4, more "
                                                            "than 2^64 bytes")
                                             .c_str()),
                       Error);
  // 47 GB declared: refused before a byte of it is read.
  write_idx(dir.path(), idx_header(2051, {60000, 28, 28000}), idx_header(2049, {60000}));
  CHECK_THROWS_WITH_AS(make_fashion_mnist(dir.path(), "train", 1),
                       doctest::Contains("declares 60000 images of 28x28000, 47040000000 bytes; expected at most "
                                         "1073741824"),
                       Error);
  // A gzip that expands to 4 MiB behind a header promising 1 byte: read up
  // to one byte past the promise, no further.
  write_idx(dir.path(), idx_header(2051, {1, 1, 1}) + std::string(4 << 20, '\0'), idx_header(2049, {1}) + "\x01");
  CHECK_THROWS_WITH_AS(
      make_fashion_mnist(dir.path(), "train", 1),
      doctest::Contains((images.string() + "': has more than 17 bytes; expected 17 for 1 images of 1x1").c_str()),
      Error);
  // 2^31 labels for 2 images: the count in full, no int overflow.
  write_idx(dir.path(), idx_header(2051, {2, 1, 1}) + "ab", idx_header(2049, {1u << 31}));
  CHECK_THROWS_WITH_AS(
      make_fashion_mnist(dir.path(), "train", 1),
      doctest::Contains((labels.string() + "': has 2147483648 labels; expected 2, one per image").c_str()), Error);
  // Images of 0x0 pixels.
  write_idx(dir.path(), idx_header(2051, {2, 0, 28}), two_labels);
  CHECK_THROWS_WITH_AS(make_fashion_mnist(dir.path(), "train", 1), doctest::Contains("expected images of 1x1 or more"),
                       Error);
  // Fewer labels than the header declares.
  write_idx(dir.path(), idx_header(2051, {2, 1, 1}) + "ab", idx_header(2049, {2}) + "\x01");
  CHECK_THROWS_WITH_AS(make_fashion_mnist(dir.path(), "train", 1),
                       doctest::Contains((labels.string() + "': has 9 bytes; expected 10 for 2 labels").c_str()),
                       Error);
}

TEST_CASE("an image folder with a symlink cycle is an error naming the link") {
  test::TempDir dir;
  const fs::path root = dir / "root";
  fs::create_directories(root / "a");
  write_file(root / "a" / "x.png", one_pixel_png());
  // A link to a sibling is followed, as os.walk(followlinks=True) does.
  fs::create_directory_symlink(root / "a", root / "b");
  auto ds = make_image_folder(root, 3);
  REQUIRE(ds->size() == 2);
  CHECK(ds->num_classes() == 2);
  fs::remove(root / "b");

  // A link back to the root: os.walk would repeat the tree until the path is
  // too long; with two such links, in exponential time.
  fs::create_directory_symlink(root, root / "a" / "up");
  const std::string message = "image folder '" + root.string() + "': '" + root.string() + "/a/up' is a symlink cycle";
  CHECK_THROWS_WITH_AS(make_image_folder(root, 3), doctest::Contains(message.c_str()), Error);
  fs::remove(root / "a" / "up");
  // A link to itself.
  fs::create_directory_symlink(".", root / "a" / "self");
  CHECK_THROWS_WITH_AS(make_image_folder(root, 3), doctest::Contains("/a/self' is a symlink cycle"), Error);
}

TEST_CASE("an image folder with a 40-level symlink diamond lists each image once, promptly") {
  // Each level holds the next twice: the real folder `a` and a link `b` to
  // it. No cycle, but 2^40 paths to the deepest image: os.walk follows every
  // one (a hang); within one class folder each real folder is walked once.
  // A path holds at most 40 links, the kernel's limit for one lookup; the
  // canonical temp folder adds none.
  constexpr int kLevels = 40;
  test::TempDir dir;
  const fs::path root = fs::canonical(dir.path()) / "root";
  fs::path level = root / "c";
  fs::create_directories(level);
  for (int i = 0; i < kLevels; ++i) {
    write_file(level / "x.png", one_pixel_png());
    fs::create_directory(level / "a");
    fs::create_directory_symlink("a", level / "b");
    level /= "a";
  }
  write_file(level / "x.png", one_pixel_png());

  auto ds = make_image_folder(root, 3);
  CHECK(ds->size() == kLevels + 1);
  std::set<ino_t> files;
  for (std::size_t i = 0; i < ds->size(); ++i) {
    struct stat st {};
    REQUIRE_MESSAGE(::stat(ds->describe(i).c_str(), &st) == 0, ds->describe(i));
    files.insert(st.st_ino);
  }
  CHECK(files.size() == ds->size());  // each image once
}

}  // namespace test_hostile_data

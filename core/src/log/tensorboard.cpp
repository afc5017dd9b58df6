#include "timm/log/tensorboard.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "timm/base/error.hpp"

namespace timm {
namespace {

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1U) != 0 ? (crc >> 1) ^ 0x82F63B78U : crc >> 1;
    table[i] = crc;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protocol buffer wire format: varints, tags, little-endian fixed widths.
void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_tag(std::string& out, std::uint32_t field, WireType type) { put_varint(out, (field << 3) | type); }

void put_fixed(std::string& out, std::uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
}

void put_double(std::string& out, std::uint32_t field, double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  put_tag(out, field, kFixed64);
  put_fixed(out, bits, 8);
}

void put_float(std::string& out, std::uint32_t field, float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  put_tag(out, field, kFixed32);
  put_fixed(out, bits, 4);
}

void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_tag(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event fields (tensorboard/compat/proto/event.proto) and Summary's.
constexpr std::uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr std::uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;

std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_double(event, kEventWallTime, wall_time);
  put_tag(event, kEventStep, kVarint);
  put_varint(event, static_cast<std::uint64_t>(step));  // int64: two's complement, as protobuf
  return event;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return name.data();
}

// EventFileWriter's _global_uid: the files this process opened so far.
std::atomic<int64_t> file_counter{0};

}  // namespace

std::uint32_t crc32c(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFFU;
  for (const char c : data) crc = kCrc32cTable[(crc ^ static_cast<unsigned char>(c)) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFU;
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

std::string tfrecord(std::string_view data) {
  std::string length;
  put_fixed(length, data.size(), 8);
  std::string record = length;
  put_fixed(record, masked_crc32c(length), 4);
  record.append(data);
  put_fixed(record, masked_crc32c(data), 4);
  return record;
}

std::string encode_file_version_event(double wall_time) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, kEventFileVersion, "brain.Event:2");
  return event;
}

std::string encode_scalars_event(double wall_time, int64_t step, const std::vector<TensorBoardScalar>& scalars) {
  std::string summary;
  for (const TensorBoardScalar& scalar : scalars) {
    std::string value;
    put_bytes(value, kValueTag, scalar.tag);
    put_float(value, kValueSimpleValue, static_cast<float>(scalar.value));
    put_bytes(summary, kSummaryValue, value);
  }
  std::string event = event_header(wall_time, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::string event_file_name(int64_t unix_seconds, const std::string& host, int64_t pid, int64_t counter) {
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%010lld", static_cast<long long>(unix_seconds));
  return "events.out.tfevents." + std::string(stamp) + "." + host + "." + std::to_string(pid) + "." +
         std::to_string(counter);
}

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create TensorBoard folder " + in_quotes(dir.string()) + ": " + ec.message());
  const double wall_time = now_seconds();
  path_ = dir / event_file_name(static_cast<int64_t>(wall_time), hostname(), getpid(), file_counter++);
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) fail("cannot create");
  write_record(encode_file_version_event(wall_time));
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::add_scalars(int64_t step, const std::vector<TensorBoardScalar>& scalars) {
  write_record(encode_scalars_event(now_seconds(), step, scalars));
}

void TensorBoardWriter::flush() {
  if (std::fflush(file_) != 0) fail("cannot write");
}

void TensorBoardWriter::write_record(const std::string& event) {
  const std::string record = tfrecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) fail("cannot write");
}

void TensorBoardWriter::fail(const std::string& what) const {
  const int error = errno;
  throw Error(what + " TensorBoard event file " + in_quotes(path_.string()) + ": " +
              (error != 0 ? std::strerror(error) : "unknown error"));
}

}  // namespace timm

// TensorBoard event files without TensorFlow or protobuf: scalars written as
// TensorBoard's own EventFileWriter writes them, so `tensorboard --logdir`
// (and its EventAccumulator) reads them.
//
// The file is a TFRecord stream: each record is a little-endian uint64
// length, the masked CRC32C of those 8 bytes, the data, and the masked CRC32C
// of the data. Each record's data is an Event protocol buffer, encoded here
// by hand: wall_time (double, field 1), step (int64, field 2), and either
// file_version "brain.Event:2" (string, field 3, the first event of a file)
// or a summary (field 5) of repeated values (field 1) of {tag (string, field
// 1), simple_value (float, field 2)}.
//
//   timm::TensorBoardWriter writer(output_dir);  // events.out.tfevents.<time>.<host>.<pid>.<n>
//   writer.add_scalars(step, {{"train/loss", 0.5}, {"train/lr", 0.1}});
//   writer.flush();  // what was added is on disk
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace timm {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `data`:
// crc32c("123456789") is 0xE3069283.
std::uint32_t crc32c(std::string_view data);

// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(std::string_view data);

// One TFRecord around `data`: length, its masked CRC, data, its masked CRC.
std::string tfrecord(std::string_view data);

struct TensorBoardScalar {
  std::string tag;
  double value;  // stored as float32 (simple_value)
};

// The encoded Event protocol buffers.
std::string encode_file_version_event(double wall_time);
std::string encode_scalars_event(double wall_time, int64_t step, const std::vector<TensorBoardScalar>& scalars);

// TensorBoard's EventFileWriter's file name:
// "events.out.tfevents.%010d.%s.%s.%s" % (time, hostname, pid, counter).
std::string event_file_name(int64_t unix_seconds, const std::string& hostname, int64_t pid, int64_t counter);

// Writes one event file in `dir` (created when missing), named by
// event_file_name() with this process's host and pid and a per-process
// counter, starting with the file_version event (flushed at once). Events
// are buffered until flush(). Write failures throw timm::Error naming the
// file. Not thread-safe.
class TensorBoardWriter {
 public:
  explicit TensorBoardWriter(const std::filesystem::path& dir);
  ~TensorBoardWriter();  // flushes; errors there are not reported
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event at `step` holding every scalar, stamped with the current time.
  void add_scalars(int64_t step, const std::vector<TensorBoardScalar>& scalars);
  void add_scalar(const std::string& tag, double value, int64_t step) { add_scalars(step, {{tag, value}}); }
  // Puts every event added so far into the file (the OS's page cache).
  void flush();

  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& event);
  [[noreturn]] void fail(const std::string& what) const;

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace timm

// Atomic file writes: a crash leaves either the old file or the new one,
// never a half-written one.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace timm {

// Streams into a unique temporary file in the target's folder; commit()
// flushes it to disk, renames it over the target and flushes the folder.
// Without commit() (an exception, say) the temporary file is removed and the
// target is untouched. Errors throw Error naming the target and `what` (e.g.
// "safetensors file").
class AtomicFile {
 public:
  AtomicFile(const std::filesystem::path& path, std::string what = "file");
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t size);
  void commit();

 private:
  [[noreturn]] void fail(const std::string& problem) const;

  std::filesystem::path path_;
  std::string what_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `content` to `path` atomically with an AtomicFile; `what` names it
// in errors.
void write_file_atomically(const std::filesystem::path& path, const std::string& content, std::string what = "file");

// Copies `from` to `to` atomically with an AtomicFile, in pieces (a checkpoint
// may not fit in memory twice); `what` names `to` in errors.
void copy_file_atomically(const std::filesystem::path& from, const std::filesystem::path& to,
                          std::string what = "file");

}  // namespace timm

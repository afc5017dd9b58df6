// The tar member listing of the image-in-tar and WebDataset readers: Python
// tarfile's view of an uncompressed tar (ustar prefixes, GNU long names, pax
// paths), every header checked against the file before anything is read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace timm::tar {

// An open file read with pread, so that loader threads share one descriptor.
// `reader` prefixes the messages ("image-in-tar", "wds").
class File {
 public:
  // Throws Error naming the file when it cannot be opened.
  File(const std::filesystem::path& path, std::string reader);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Exactly `size` bytes at `offset`; a short read (a truncated tar) throws Error.
  std::vector<std::uint8_t> read(int64_t offset, int64_t size) const;
  // The size of the open file (not of whatever the path names by now);
  // throws Error for a file that is not a regular file.
  int64_t size() const;
  const std::string& path() const { return path_; }
  const std::string& reader() const { return reader_; }

 private:
  std::string path_;
  std::string reader_;
  int fd_;
};

// A regular-file member: its path in the tar and its data's byte range.
struct Member {
  std::string path;
  int64_t offset = 0;
  int64_t size = 0;
};

// The regular-file members of the tar occupying [begin, end) of `file`, in
// archive order; stops at the first zero block, as tarfile does. A corrupt
// header, or a member reaching past `end`, throws Error naming the file and
// the byte; with `error` set, the listing instead stops there, keeps the
// members before it and stores the message in *error (webdataset's handler
// goes on with the next shard after a broken one).
std::vector<Member> list_members(const File& file, int64_t begin, int64_t end, std::string* error = nullptr);

}  // namespace timm::tar

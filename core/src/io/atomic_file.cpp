#include "timm/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "timm/base/error.hpp"

namespace timm {
namespace fs = std::filesystem;
namespace {

fs::path folder_of(const fs::path& path) { return path.parent_path().empty() ? fs::path(".") : path.parent_path(); }

struct ClosingFd {
  int fd;
  ~ClosingFd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

AtomicFile::AtomicFile(const fs::path& path, std::string what) : path_(path), what_(std::move(what)) {
  // Built by appending: g++ 12 warns falsely (-Wstringop-overflow) on
  // "literal" + std::string&&.
  std::string temp_name = ".";
  temp_name += path.filename().string();
  temp_name += ".tmp-XXXXXX";
  std::string pattern = (folder_of(path) / temp_name).string();
  fd_ = ::mkstemp(pattern.data());
  if (fd_ < 0) fail("cannot create a temporary file in '" + folder_of(path).string() + "': " + std::strerror(errno));
  temp_path_ = pattern;
  ::fchmod(fd_, 0644);  // mkstemp's 0600 would surprise whoever shares the file
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFile::write(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::string("write failed: ") + std::strerror(errno));
    // Not an error by POSIX, yet retrying would spin forever.
    if (n == 0) fail("write failed: no byte written");
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail(std::string("fsync failed: ") + std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(std::string("close failed: ") + std::strerror(errno));
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    fail(std::string("cannot rename the temporary file: ") + std::strerror(errno));
  }
  committed_ = true;
  // The rename itself survives a crash only once the folder is flushed; best
  // effort, as some file systems refuse fsync on folders.
  const int dir_fd = ::open(folder_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void AtomicFile::fail(const std::string& problem) const {
  throw Error("cannot write " + what_ + " '" + path_.string() + "': " + problem);
}

void write_file_atomically(const fs::path& path, const std::string& content, std::string what) {
  AtomicFile file(path, std::move(what));
  file.write(content.data(), content.size());
  file.commit();
}

void copy_file_atomically(const fs::path& from, const fs::path& to, std::string what) {
  const ClosingFd in{::open(from.c_str(), O_RDONLY | O_CLOEXEC)};
  if (in.fd < 0) throw Error("cannot read '" + from.string() + "': " + std::strerror(errno));
  AtomicFile out(to, std::move(what));
  std::vector<char> buffer(std::size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(in.fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read '" + from.string() + "': " + std::strerror(errno));
    if (n == 0) break;
    out.write(buffer.data(), static_cast<std::size_t>(n));
  }
  out.commit();
}

}  // namespace timm

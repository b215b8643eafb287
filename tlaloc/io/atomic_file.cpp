#include "tlaloc/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "tlaloc/core/error.h"

namespace tlaloc::io {

std::string parent_dir(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

static std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

AtomicFile::AtomicFile(std::string path, SaveOptions options)
    : path_(std::move(path)), opt_(std::move(options)) {
  if (path_.empty() || path_.back() == '/') fail("cannot save to '{}': not a file name", path_);
  if (opt_.chunk_bytes == 0) opt_.chunk_bytes = 1;
  std::string dir = parent_dir(path_);
  std::string tmpl = (dir == "/" ? "" : dir) + "/." + base_name(path_) + ".tmp.XXXXXX";
  if (path_.find('/') == std::string::npos) tmpl = "." + path_ + ".tmp.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  fd_ = ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd_ < 0)
    fail("{}: cannot create a temporary file in {}: {}", path_, dir, std::strerror(errno));
  temp_ = buf.data();
  ::fchmod(fd_, 0644);  // mkostemp creates 0600; a checkpoint is an ordinary file
  if (opt_.progress) opt_.progress(SaveStage::temp_created, 0);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) fail("{}: write after commit", path_);
  while (!bytes.empty()) {
    size_t n = std::min(bytes.size(), opt_.chunk_bytes);
    ssize_t w = ::write(fd_, bytes.data(), n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("{}: write to {} failed after {} bytes: {}", path_, temp_, written_,
           std::strerror(errno));
    }
    bytes = bytes.subspan(size_t(w));
    written_ += uint64_t(w);
    if (opt_.progress) opt_.progress(SaveStage::wrote, written_);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) fail("{}: commit twice", path_);
  if (::fsync(fd_) != 0) fail("{}: fsync of {} failed: {}", path_, temp_, std::strerror(errno));
  if (opt_.progress) opt_.progress(SaveStage::file_synced, written_);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("{}: close of {} failed: {}", path_, temp_, std::strerror(errno));
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    fail("{}: rename from {} failed: {}", path_, temp_, std::strerror(errno));
  committed_ = true;
  if (opt_.progress) opt_.progress(SaveStage::renamed, written_);
  std::string dir = parent_dir(path_);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) fail("{}: cannot open folder {} to fsync it: {}", path_, dir, std::strerror(errno));
  int rc = ::fsync(dfd);
  int e = errno;
  ::close(dfd);
  if (rc != 0) fail("{}: fsync of folder {} failed: {}", path_, dir, std::strerror(e));
  if (opt_.progress) opt_.progress(SaveStage::dir_synced, written_);
}

}  // namespace tlaloc::io

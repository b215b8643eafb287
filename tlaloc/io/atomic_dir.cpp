#include "tlaloc/io/atomic_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "tlaloc/core/error.h"

namespace tlaloc::io {

namespace fs = std::filesystem;

namespace {

// The folder `dir` (".", "/", ...) fsynced; throws naming `what` on failure.
void fsync_folder(const std::string& dir, const std::string& what) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open folder {} to fsync it: {}", what, dir, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) fail("{}: fsync of folder {} failed: {}", what, dir, std::strerror(e));
}

// Throws unless `path` is absent or a folder (symbolic links followed).
void require_folder_or_absent(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return;
  fail("{} {} exists and is not a folder: tlaloc replaces only folders with a model directory",
       what, path);
}

bool is_staging_name(const std::string& name, const std::string& prefix) {
  if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < name.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

// "DIR/" for a path with a folder part, "" for a bare name.
std::string folder_prefix(const std::string& path) {
  const std::string dir = parent_dir(path);
  return path.find('/') == std::string::npos ? "" : (dir == "/" ? "/" : dir + "/");
}

}  // namespace

void check_output_folder(const std::string& dir, const std::string& what, const std::string& kind,
                         const std::function<bool(const std::string&)>& is_ours,
                         const std::string& ours) {
  const std::string d = folder_name(dir, what);
  check_writable_folder(d, what, parent_dir(d));
  struct stat st {};
  if (::stat(d.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    fail("{} {}: {}", what, d, std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) fail("{} {} exists and is not a folder", what, d);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(d, ec)) {
    const std::string n = e.path().filename().string();
    if (!is_ours(n))
      fail(
          "{} {} holds '{}', which is not a file of a {}: tlaloc writes a {} only to a new or "
          "empty folder or over a {} ({})",
          what, d, n, kind, kind, kind, ours);
    if (!e.is_regular_file()) fail("{} {}: '{}' is not a regular file", what, d, n);
  }
  if (ec) fail("{} {}: cannot list the folder: {}", what, d, ec.message());
}

std::string folder_name(const std::string& path, const std::string& what) {
  if (path.empty()) fail("{} is empty", what);
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const std::string base = base_name(p);
  if (p == "/" || base == "." || base == "..")
    fail("{} {}: give the folder a name of its own (not '/', '.' or '..')", what, path);
  return p;
}

AtomicDir::AtomicDir(std::string path, const std::string& what, SaveOptions options)
    : path_(folder_name(path, what)), what_(what), opt_(std::move(options)) {
  const std::string parent = parent_dir(path_);
  check_writable_folder(path_, what_, parent);
  require_folder_or_absent(path_, what_);
  lock_ = WriteLock(path_, what_);
  // Staging folders of killed saves: ours alone to remove while we hold the lock.
  const std::string prefix = "." + base_name(path_) + ".saving.";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    struct stat st {};
    const std::string name = e.path().filename().string();
    if (is_staging_name(name, prefix) && ::lstat(e.path().c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode) && st.st_uid == ::geteuid())
      fs::remove_all(e.path(), ec);
  }
  std::string tmpl = folder_prefix(path_) + prefix + "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    fail("{} {}: cannot create a staging folder in {}: {}", what_, path_, parent,
         std::strerror(errno));
  staging_ = buf.data();
  ::chmod(staging_.c_str(), 0755);  // mkdtemp makes 0700; a model directory is an ordinary one
  slot_ = detail::register_live(staging_, true);
}

AtomicDir::~AtomicDir() {
  if (!staging_.empty()) {
    std::error_code ec;
    fs::remove_all(staging_, ec);  // the new folder (not committed) or the previous one
  }
  detail::unregister_live(slot_);
}

std::string AtomicDir::file(const std::string& name) const {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    fail("{} {}: '{}' is not a plain file name", what_, path_, name);
  return staging_ + "/" + name;
}

void AtomicDir::add_existing(const std::string& name, const std::string& source, bool may_link) {
  const std::string target = file(name);
  if (may_link && ::link(source.c_str(), target.c_str()) == 0) return;
  std::ifstream in(source, std::ios::binary);
  if (!in) fail("{} {}: cannot read {}: {}", what_, path_, source, std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("{} {}: cannot read {}", what_, path_, source);
  AtomicFile out(target, opt_);
  out.write(std::as_bytes(std::span<const char>(bytes)));
  out.commit();
}

void AtomicDir::commit() {
  if (committed_) fail("{} {}: commit twice", what_, path_);
  fsync_folder(staging_, what_ + " " + path_);
  require_folder_or_absent(path_, what_);
  struct stat st {};
  if (::lstat(path_.c_str(), &st) != 0) {
    if (::rename(staging_.c_str(), path_.c_str()) != 0)
      fail("{} {}: rename from {} failed: {}", what_, path_, staging_, std::strerror(errno));
    staging_.clear();  // nothing left to remove
  } else if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) !=
             0) {
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
      fail("{} {}: exchange with {} failed: {}", what_, path_, staging_, std::strerror(errno));
    // No RENAME_EXCHANGE here: two renames (see atomic_dir.h).
    const std::string old = staging_ + "-old";
    if (::rename(path_.c_str(), old.c_str()) != 0)
      fail("{} {}: rename to {} failed: {}", what_, path_, old, std::strerror(errno));
    if (::rename(staging_.c_str(), path_.c_str()) != 0)
      fail("{} {}: rename from {} failed: {} (the previous folder is {})", what_, path_, staging_,
           std::strerror(errno), old);
    staging_ = old;
  }
  committed_ = true;
  fsync_folder(parent_dir(path_), what_ + " " + path_);
  if (opt_.progress) opt_.progress(SaveStage::folder_published, 0);
  std::error_code ec;
  if (!staging_.empty()) fs::remove_all(staging_, ec);  // the previous folder
  staging_.clear();
  detail::unregister_live(slot_);
  slot_ = -1;
}

}  // namespace tlaloc::io

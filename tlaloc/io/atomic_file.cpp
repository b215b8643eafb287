#include "tlaloc/io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "tlaloc/core/error.h"

namespace tlaloc::io {

namespace {

// ---- live temporaries, for remove_live_temporaries() in signal handlers ----
// Fixed slots, no allocation: a handler reads them while the thread it interrupted may be
// registering one. `state` 0: free, 1: being filled, 2: a temporary file, 3: a staging folder.
constexpr int kSlots = 32;
struct Slot {
  std::atomic<int> state{0};
  char path[PATH_MAX];
};
Slot g_slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers read the slots");

int register_temp(const std::string& p) { return detail::register_live(p, false); }
void unregister_temp(int slot) { detail::unregister_live(slot); }

// Removes the files of a staging folder, then the folder (it holds no folders). Only system
// calls, on a fixed buffer: async-signal-safe.
void remove_flat_folder(const char* path) noexcept {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  for (;;) {
    const ssize_t n = ::getdents64(fd, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(buf + off);
      off += e->d_reclen;
      const char* name = e->d_name;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
      ::unlinkat(fd, name, 0);
    }
  }
  ::close(fd);
  ::rmdir(path);
}

// "a character device", ... for a file that is not a regular file.
const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Throws unless `path` is absent or a regular file (symbolic links followed).
void require_regular_or_absent(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  fail("{} is {}, not a regular file: tlaloc replaces only regular files", path,
       kind_of(st.st_mode));
}

bool is_temp_suffix(const char* s) {
  for (int i = 0; i < 6; ++i)
    if (!std::isalnum(static_cast<unsigned char>(s[i]))) return false;
  return s[6] == '\0';
}

// Removes ".BASE.tmp.XXXXXX" files in `dir` left by killed writers (see atomic_file.h):
// regular files of this user that no live writer holds locked.
void remove_stale_temporaries(const std::string& dir, const std::string& base) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;  // the temporary's creation reports an unusable folder
  const std::string prefix = "." + base + ".tmp.";
  const int dfd = ::dirfd(d);
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0 ||
        !is_temp_suffix(e->d_name + prefix.size()))
      continue;
    int fd = ::openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {
    }, now{};
    // Still the file we locked under that name (not renamed or replaced meanwhile)?
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::fstatat(dfd, e->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st.st_dev &&
        now.st_ino == st.st_ino)
      ::unlinkat(dfd, e->d_name, 0);
    ::close(fd);
  }
  ::closedir(d);
}

}  // namespace

namespace detail {

int register_live(const std::string& p, bool folder) {
  if (p.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (!g_slots[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(g_slots[i].path, p.c_str(), p.size() + 1);
    g_slots[i].state.store(folder ? 3 : 2, std::memory_order_release);
    return i;
  }
  return -1;  // more live saves than slots: the destructor or the next save still removes it
}

void unregister_live(int slot) {
  if (slot >= 0) g_slots[slot].state.store(0, std::memory_order_release);
}

}  // namespace detail

void remove_live_temporaries() noexcept {
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == 2) ::unlink(s.path);
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == 3) remove_flat_folder(s.path);
}

void check_writable_folder(const std::string& path, const std::string& what,
                           const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) fail("{} {}: folder {} does not exist", what, path, dir);
    fail("{} {}: folder {} cannot be reached: {}", what, path, dir, std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) fail("{} {}: {} is not a folder", what, path, dir);
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    fail("{} {}: folder {} is not writable: {}", what, path, dir, std::strerror(errno));
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::exists(a, ec) && std::filesystem::exists(b, ec))
    return std::filesystem::equivalent(a, b, ec);
  return std::filesystem::absolute(a, ec).lexically_normal() ==
         std::filesystem::absolute(b, ec).lexically_normal();
}

std::string parent_dir(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void check_output_file(const std::string& path, const std::string& what, OutputMode mode) {
  if (path.empty()) fail("{} is empty", what);
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  const int stat_error = exists ? 0 : errno;
  if ((exists && S_ISDIR(st.st_mode)) || path.back() == '/')
    fail("{} {} is a folder; give a file name", what, path);
  if (exists && !S_ISREG(st.st_mode))
    fail("{} {} is {}, not a regular file (tlaloc writes only regular files)", what, path,
         kind_of(st.st_mode));
  check_writable_folder(path, what, parent_dir(path));
  // The temporary beside it, ".NAME.tmp.XXXXXX", must fit in a file name too.
  constexpr size_t kTempExtra = std::char_traits<char>::length("..tmp.XXXXXX");
  const size_t name_max =
      size_t(std::max<long>(::pathconf(parent_dir(path).c_str(), _PC_NAME_MAX), kTempExtra + 1));
  if (base_name(path).size() + kTempExtra > name_max)
    fail(
        "{} {}: the file name is {} bytes, more than the {} this folder allows with the {} of "
        "its temporary",
        what, path, base_name(path).size(), name_max - kTempExtra, kTempExtra);
  if (!exists) {
    if (stat_error != ENOENT) fail("{} {}: {}", what, path, std::strerror(stat_error));
    return;
  }
  if (mode == OutputMode::append && ::access(path.c_str(), W_OK) != 0)
    fail("{} {} is not writable: {}", what, path, std::strerror(errno));
}

void check_output_png(const std::string& path, const std::string& what,
                      const std::optional<std::string>& not_inside) {
  check_output_file(path, what, OutputMode::replace);
  static constexpr unsigned char kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    unsigned char head[8] = {};
    std::FILE* f = std::fopen(path.c_str(), "rb");
    const size_t n = f ? std::fread(head, 1, 8, f) : 0;
    if (f) std::fclose(f);
    if (n != 8 || std::memcmp(head, kPng, 8) != 0)
      fail("{} {} exists and is not a PNG picture: a picture replaces only a picture", what, path);
  }
  if (not_inside) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path dir = fs::weakly_canonical(fs::absolute(*not_inside), ec);
    const fs::path parent = fs::weakly_canonical(fs::absolute(path).parent_path(), ec);
    if (!ec && dir == parent)
      fail("{} {} is inside {}, the folder the run saves; put the picture elsewhere", what, path,
           *not_inside);
  }
}

AtomicFile::AtomicFile(std::string path, SaveOptions options)
    : path_(std::move(path)), opt_(std::move(options)) {
  if (path_.empty() || path_.back() == '/') fail("cannot save to '{}': not a file name", path_);
  if (opt_.chunk_bytes == 0) opt_.chunk_bytes = 1;
  require_regular_or_absent(path_);
  remove_stale_temporaries(parent_dir(path_), base_name(path_));
  create_temp();
  if (opt_.progress) opt_.progress(SaveStage::temp_created, 0);
}

void AtomicFile::create_temp() {
  const std::string dir = parent_dir(path_);
  const std::string tmpl =
      (path_.find('/') == std::string::npos ? "" : (dir == "/" ? "/" : dir + "/")) + "." +
      base_name(path_) + ".tmp.XXXXXX";
  // Locked at once; a stale-temporary sweep of another writer may have taken it between
  // mkostemp and flock and removed it: then the name no longer leads to our file, try again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    fd_ = ::mkostemp(buf.data(), O_CLOEXEC);
    if (fd_ < 0)
      fail("{}: cannot create a temporary file in {}: {}", path_, dir, std::strerror(errno));
    temp_ = buf.data();
    slot_ = register_temp(temp_);
    struct stat mine {
    }, named{};
    if (::flock(fd_, LOCK_EX) == 0 && ::fstat(fd_, &mine) == 0 &&
        ::lstat(temp_.c_str(), &named) == 0 && mine.st_ino == named.st_ino &&
        mine.st_dev == named.st_dev) {
      ::fchmod(fd_, 0644);  // mkostemp creates 0600; a checkpoint is an ordinary file
      return;
    }
    ::close(fd_);
    fd_ = -1;
    unregister_temp(slot_);
    slot_ = -1;
  }
  fail("{}: cannot keep a temporary file in {}", path_, dir);
}

void AtomicFile::drop_temp() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
  unregister_temp(slot_);
  slot_ = -1;
  temp_.clear();
}

AtomicFile::~AtomicFile() { drop_temp(); }

void AtomicFile::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) fail("{}: write after commit", path_);
  while (!bytes.empty()) {
    size_t n = std::min(bytes.size(), opt_.chunk_bytes);
    ssize_t w = ::write(fd_, bytes.data(), n);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      const std::string temp = temp_;
      drop_temp();  // a full disk: give the space back now, not when the caller unwinds
      fail("{}: write to {} failed after {} bytes: {}", path_, temp, written_, std::strerror(e));
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
  // The target may have become a device or a folder since the constructor looked.
  require_regular_or_absent(path_);
  // Renamed while still open and locked, so no other writer's sweep takes it for stale.
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    fail("{}: rename from {} failed: {}", path_, temp_, std::strerror(errno));
  committed_ = true;
  unregister_temp(slot_);
  slot_ = -1;
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("{}: close of {} failed: {}", path_, temp_, std::strerror(errno));
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

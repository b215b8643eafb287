#include "tlaloc/io/write_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "tlaloc/core/error.h"
#include "tlaloc/io/atomic_file.h"

namespace tlaloc::io {

namespace {

struct Held {
  int fd = -1;
  int count = 0;
};

// This process's locks by lock file identity (a second open file of the same lock file would
// conflict with our own flock, so one descriptor per file, counted).
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::pair<dev_t, ino_t>, Held>& registry() {
  static std::map<std::pair<dev_t, ino_t>, Held> r;
  return r;
}

// " (process N)" for the process /proc/locks lists as holding a flock on the file `st`, or ""
// (no /proc, another pid namespace). Lines read "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
// (device numbers in hex); waiting lockers' lines have "->" and are skipped.
std::string holder_of(const struct stat& st) {
  std::ifstream f("/proc/locks");
  std::string line;
  while (std::getline(f, line)) {
    if (line.find("->") != std::string::npos) continue;
    std::istringstream in(line);
    std::string id, kind, advisory, mode, pid, where;
    if (!(in >> id >> kind >> advisory >> mode >> pid >> where) || kind != "FLOCK") continue;
    unsigned maj = 0, min = 0;
    unsigned long long ino = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &maj, &min, &ino) != 3) continue;
    if (ino == st.st_ino && maj == major(st.st_dev) && min == minor(st.st_dev) && pid != "0")
      return " (process " + pid + ")";
  }
  return "";
}

void release(std::pair<dev_t, ino_t> key) {
  if (key.second == 0) return;
  std::lock_guard<std::mutex> g(registry_mutex());
  auto it = registry().find(key);
  if (it == registry().end() || --it->second.count > 0) return;
  ::close(it->second.fd);  // drops the flock
  registry().erase(it);
}

}  // namespace

std::string lock_path(const std::string& path) {
  const std::string dir = parent_dir(path);
  return (path.find('/') == std::string::npos ? "" : (dir == "/" ? "/" : dir + "/")) + "." +
         base_name(path) + ".lock";
}

WriteLock::WriteLock(const std::string& path, const std::string& what) {
  const std::string lp = lock_path(path);
  int fd = ::open(lp.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && (errno == EACCES || errno == EROFS))  // another user's lock file: read is enough
    fd = ::open(lp.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("{} {}: cannot open its lock file {}: {}", what, path, lp, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{} {}: its lock file {} is not a regular file", what, path, lp);
  }
  const std::pair<dev_t, ino_t> key{st.st_dev, st.st_ino};
  std::lock_guard<std::mutex> g(registry_mutex());
  auto it = registry().find(key);
  if (it != registry().end()) {  // this process holds it already: share
    ::close(fd);
    ++it->second.count;
    key_ = key;
    return;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    const std::string holder = e == EWOULDBLOCK ? holder_of(st) : "";
    ::close(fd);
    if (e == EWOULDBLOCK)
      fail(
          "{} {} is being written by another run{}: two runs must not write one file (lock {}); "
          "wait for it to end or choose another file",
          what, path, holder, lp);
    fail("{} {}: cannot lock {}: {}", what, path, lp, std::strerror(e));
  }
  registry()[key] = Held{fd, 1};
  key_ = key;
}

WriteLock& WriteLock::operator=(WriteLock&& o) noexcept {
  if (this != &o) {
    release(key_);
    key_ = std::exchange(o.key_, {});
  }
  return *this;
}

WriteLock::~WriteLock() { release(key_); }

}  // namespace tlaloc::io

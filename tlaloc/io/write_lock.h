// An advisory lock that keeps two runs from writing one file (two `tlaloc train` runs with the
// same --save would otherwise overwrite each other's checkpoints without a word).
//
// Design: flock(2) LOCK_EX | LOCK_NB on a lock file ".NAME.lock" beside the target NAME. The
// lock file is opened with O_CREAT (created empty, mode 0644, when missing) and O_NOFOLLOW, and
// is never written, truncated or removed: removing it would let a third run lock a new file of
// that name while a second still holds the old one, and leaving it costs one empty file. Nothing
// else is touched, so the lock cannot delete or damage anyone's files; the target itself is
// replaced by rename (atomic_file.h), so it cannot carry the lock. The kernel drops the lock when
// the process ends, however it ends (SIGKILL included), so a killed run never blocks the next.
// Only processes that take this lock are kept out (tlaloc's fit loop does, for --save).
//
// Within one process, locks on the same lock file are shared and counted (a recipe takes it
// before its work starts, the fit loop it calls takes it again), and released with the last.
#pragma once

#include <sys/types.h>
#include <string>
#include <utility>

namespace tlaloc::io {

class WriteLock {
 public:
  WriteLock() = default;
  // Locks `path`'s lock file, or shares this process's lock on it. Throws one tlaloc::Error line
  // starting with `what` (e.g. "train fmnist: --save") when another process holds it, naming
  // the file and that process when /proc/locks tells it ("... is being written by another run
  // (process 1234) ..."), or when the lock file cannot be opened.
  WriteLock(const std::string& path, const std::string& what);
  WriteLock(WriteLock&& o) noexcept : key_(std::exchange(o.key_, {})) {}
  WriteLock& operator=(WriteLock&& o) noexcept;
  WriteLock(const WriteLock&) = delete;
  WriteLock& operator=(const WriteLock&) = delete;
  ~WriteLock();

  bool held() const { return key_.second != 0; }

 private:
  std::pair<dev_t, ino_t> key_{};  // the lock file's identity; {0, 0}: none
};

// ".NAME.lock" beside `path`.
std::string lock_path(const std::string& path);

}  // namespace tlaloc::io

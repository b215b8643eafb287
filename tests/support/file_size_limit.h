// A full disk, simulated: while a FileSizeLimit lives, no file of this process grows past the
// limit (RLIMIT_FSIZE, soft limit only); the write that would fails with EFBIG ("File too
// large") instead of raising SIGXFSZ. Both come back as they were at scope exit.
#pragma once

#include <signal.h>
#include <sys/resource.h>

#include <cstdint>

namespace tlaloc::testing {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t max_bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old_;
    lim.rlim_cur = max_bytes;
    setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

}  // namespace tlaloc::testing

// Helpers for the io tests: scratch folders, raw file bytes built by hand, another process
// holding a write lock.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support/error_of.h"
#include "tlaloc/core/error.h"
#include "tlaloc/io/write_lock.h"

namespace tlaloc::io::testing {

using tlaloc::testing::error_of;  // the message of the tlaloc::Error f throws

// A fresh folder under TMPDIR (or /tmp), removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/tlaloc_io_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// 8-byte little-endian `length` (written as given), then `header`, then `data`.
inline std::vector<std::byte> raw_file(uint64_t length, const std::string& header,
                                       const std::vector<std::byte>& data = {}) {
  std::vector<std::byte> b(8);
  for (int i = 0; i < 8; ++i) b[size_t(i)] = std::byte((length >> (8 * i)) & 0xff);
  auto h = bytes_of(header);
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}
// The same with the true header length.
inline std::vector<std::byte> raw_file(const std::string& header,
                                       const std::vector<std::byte>& data = {}) {
  return raw_file(header.size(), header, data);
}

inline void write_bytes(const std::string& path, const std::vector<std::byte>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

inline std::vector<std::byte> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
  return b;
}

// A child process that takes the lock of `path` as another tlaloc process would (its own open
// file and flock: a forked child's copy of this process's WriteLocks would share them) and
// holds it until destroyed; pid -1 when it could not take it.
struct Holder {
  pid_t pid = -1;
  int release_fd = -1;
  explicit Holder(const std::string& path) {
    int ready[2], release[2];
    if (pipe(ready) != 0 || pipe(release) != 0) return;
    pid = fork();
    if (pid == 0) {
      close(ready[0]);
      close(release[1]);
      const int fd = open(io::lock_path(path).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      char c = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 ? 'y' : 'n';
      if (write(ready[1], &c, 1) != 1) _exit(1);
      while (read(release[0], &c, 1) > 0) {
      }
      _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    release_fd = release[1];
    char c = 0;
    if (read(ready[0], &c, 1) != 1 || c != 'y') {
      close(release_fd);
      release_fd = -1;
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
    close(ready[0]);
  }
  ~Holder() {
    if (release_fd >= 0) close(release_fd);
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;
};

// The exit status of Debian's /usr/bin/python3 running tests/io/SCRIPT with `args` (each
// quoted); -1 when it did not exit.
inline int run_python(const std::string& script, const std::vector<std::string>& args) {
  std::string cmd =
      "/usr/bin/python3 '" + std::string(TLALOC_SOURCE_DIR) + "/tests/io/" + script + "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The names in folder `dir` (recursively, as relative paths), sorted; {} when it is absent.
inline std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> r;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    r.push_back(std::filesystem::relative(it->path(), dir).string());
  std::sort(r.begin(), r.end());
  return r;
}

inline std::string read_text(const std::string& path) {
  auto b = read_bytes(path);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace tlaloc::io::testing

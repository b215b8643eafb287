// io::WriteLock: another process holding the lock of a file is refused by name (the file and
// that process); locks of one process on one file are shared, whatever the path's spelling, and
// released with the last; the lock file is never removed, and a symbolic link in its place is
// refused without touching what it points to.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "io/io_test_util.h"
#include "tlaloc/io/write_lock.h"

namespace tlaloc::io {
namespace {

using testing::ScratchDir;

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
      const int fd = open(lock_path(path).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
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

TEST(WriteLock, AnotherProcessIsRefusedByNameUntilItEnds) {
  ScratchDir dir;
  const std::string p = dir.file("m.safetensors");
  EXPECT_EQ(lock_path(p), dir.file(".m.safetensors.lock"));
  EXPECT_EQ(lock_path("m.st"), ".m.st.lock");
  {
    Holder other(p);
    ASSERT_GT(other.pid, 0);
    const std::string e = testing::error_of([&] { WriteLock l(p, "train x: --save"); });
    EXPECT_EQ(e.rfind("train x: --save " + p + " is being written by another run", 0), 0u) << e;
    // /proc/locks names the holder where there is a /proc of this pid namespace.
    if (std::filesystem::exists("/proc/locks")) {
      EXPECT_NE(e.find("(process " + std::to_string(other.pid) + ")"), std::string::npos) << e;
    }
    EXPECT_NE(e.find("(lock " + lock_path(p) + ")"), std::string::npos) << e;
  }
  WriteLock mine(p, "train x: --save");  // the holder ended: free again
  EXPECT_TRUE(mine.held());
  EXPECT_TRUE(std::filesystem::exists(lock_path(p)));
}

TEST(WriteLock, OneProcessSharesItsLockAndReleasesItWithTheLast) {
  ScratchDir dir;
  const std::string p = dir.file("m.st");
  std::optional<WriteLock> a(std::in_place, p, "a");
  WriteLock b(dir.path() + "/./m.st", "b");  // the same file, spelled otherwise: shared
  a.reset();
  {
    Holder other(p);  // still held by `b`: the child cannot take it
    EXPECT_EQ(other.pid, -1);
  }
  b = WriteLock();
  Holder other(p);  // released with the last
  EXPECT_GT(other.pid, 0);
}

TEST(WriteLock, ASymbolicLinkAsTheLockFileIsRefusedAndItsTargetLeftAlone) {
  ScratchDir dir;
  testing::write_bytes(dir.file("victim"), testing::bytes_of("keep"));
  std::filesystem::create_symlink(dir.file("victim"), lock_path(dir.file("m.st")));
  const std::string e = testing::error_of([&] { WriteLock l(dir.file("m.st"), "w"); });
  EXPECT_EQ(e.rfind("w " + dir.file("m.st") + ": cannot open its lock file", 0), 0u) << e;
  EXPECT_EQ(testing::read_text(dir.file("victim")), "keep");
}

}  // namespace
}  // namespace tlaloc::io

// io::WriteLock: another process holding the lock of a file is refused by name (the file and
// that process); locks of one process on one file are shared, whatever the path's spelling, and
// released with the last; the lock file is never removed, and a symbolic link in its place is
// refused without touching what it points to.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "io/io_test_util.h"
#include "tlaloc/io/write_lock.h"

namespace tlaloc::io {
namespace {

using testing::Holder;
using testing::ScratchDir;

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

// io::AtomicFile and io::check_output_file: only regular files are replaced (a FIFO, a device
// or a folder is refused and left as it was), the temporary is gone after a failed write (a full
// disk) and after a signal handler's remove_live_temporaries(), and a new save removes the
// temporaries of its target left by killed writers, and nothing else.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "io/io_test_util.h"
#include "support/file_size_limit.h"
#include "tlaloc/io/atomic_file.h"

namespace tlaloc::io {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

void save_text(const std::string& path, const std::string& text) {
  AtomicFile f(path);
  f.write(testing::bytes_of(text));
  f.commit();
}

bool is_fifo(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

TEST(AtomicFile, RefusesAFifoOrFolderAndLeavesItAsItWas) {
  ScratchDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_EQ(
      testing::error_of([&] { save_text(fifo, "x"); }),
      fifo + " is a FIFO (named pipe), not a regular file: tlaloc replaces only regular files");
  EXPECT_TRUE(is_fifo(fifo));
  fs::create_directory(dir.file("sub"));
  EXPECT_EQ(
      testing::error_of([&] { save_text(dir.file("sub"), "x"); }),
      dir.file("sub") + " is a folder, not a regular file: tlaloc replaces only regular files");
  // The target turns into a FIFO while the file is written: the rename is refused too, and the
  // temporary removed.
  const std::string late = dir.file("late");
  std::string e = testing::error_of([&] {
    AtomicFile f(late);
    f.write(testing::bytes_of("data"));
    ASSERT_EQ(::mkfifo(late.c_str(), 0644), 0);
    f.commit();
  });
  EXPECT_EQ(
      e, late + " is a FIFO (named pipe), not a regular file: tlaloc replaces only regular files");
  EXPECT_TRUE(is_fifo(late));
  EXPECT_EQ(names_in(dir.path()), (std::set<std::string>{"pipe", "sub", "late"}));
}

TEST(AtomicFile, AFullDiskLeavesThePreviousFileAndNoTemporary) {
  ScratchDir dir;
  const std::string p = dir.file("m.safetensors");
  save_text(p, "previous");
  std::string e;
  {
    tlaloc::testing::FileSizeLimit full(4096);
    e = testing::error_of([&] { save_text(p, std::string(1 << 20, 'x')); });
  }
  EXPECT_NE(e.find(p + ": write to " + dir.file(".m.safetensors.tmp.")), std::string::npos) << e;
  EXPECT_NE(e.find("failed after 4096 bytes: File too large"), std::string::npos) << e;
  EXPECT_EQ(names_in(dir.path()), (std::set<std::string>{"m.safetensors"}));
  EXPECT_EQ(testing::read_text(p), "previous");
}

TEST(AtomicFile, TemporariesLeftByKilledWritersAreRemovedAndNothingElse) {
  ScratchDir dir;
  const std::string p = dir.file("m.st");
  auto touch = [&](const std::string& name) { testing::write_bytes(dir.file(name), {}); };
  touch(".m.st.tmp.AbC123");  // a killed writer's: removed
  touch(".m.st.tmp.LiVe12");  // a live writer's (locked below): kept
  for (const char* other : {".m.st.tmp.short", ".m.st.tmp.AbC1234", ".m.st.tmp.Ab-123",
                            ".other.st.tmp.AbC123", "m.st.tmp.AbC123", ".m.st.lock", "victim"})
    touch(other);
  fs::create_directory(dir.file(".m.st.tmp.Dir123"));
  fs::create_symlink(dir.file("victim"), dir.file(".m.st.tmp.Lnk123"));
  const int live = ::open(dir.file(".m.st.tmp.LiVe12").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(live, 0);
  ASSERT_EQ(::flock(live, LOCK_EX), 0);
  save_text(p, "new");
  ::close(live);
  EXPECT_EQ(
      names_in(dir.path()),
      (std::set<std::string>{"m.st", ".m.st.tmp.LiVe12", ".m.st.tmp.short", ".m.st.tmp.AbC1234",
                             ".m.st.tmp.Ab-123", ".other.st.tmp.AbC123", "m.st.tmp.AbC123",
                             ".m.st.lock", "victim", ".m.st.tmp.Dir123", ".m.st.tmp.Lnk123"}));
  EXPECT_EQ(testing::read_text(p), "new");
}

// A child writing a file gets SIGINT in the middle; its handler (as tlaloc's) removes the live
// temporaries and exits.
TEST(AtomicFile, ASignalHandlerRemovesTheTemporaryOfASaveInProgress) {
  ScratchDir dir;
  const std::string p = dir.file("m.st");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct sigaction sa {};
    sa.sa_handler = [](int) {
      remove_live_temporaries();
      _exit(130);
    };
    sigaction(SIGINT, &sa, nullptr);
    SaveOptions o;
    o.chunk_bytes = 1024;
    o.progress = [](SaveStage s, uint64_t bytes) {
      if (s == SaveStage::wrote && bytes == 4096) raise(SIGINT);
    };
    AtomicFile f(p, o);
    f.write(testing::bytes_of(std::string(1 << 16, 'x')));
    f.commit();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST(CheckOutputFile, NamesTheOptionAndThePath) {
  ScratchDir dir;
  const std::string what = "train x: --save";
  auto problem = [&](const std::string& path, OutputMode mode = OutputMode::replace) {
    return testing::error_of([&] { check_output_file(path, what, mode); });
  };
  EXPECT_EQ(problem(""), "train x: --save is empty");
  EXPECT_EQ(problem(dir.file("no/m.st")), "train x: --save " + dir.file("no/m.st") + ": folder " +
                                              dir.file("no") + " does not exist");
  EXPECT_EQ(problem(dir.path()),
            "train x: --save " + dir.path() + " is a folder; give a file name");
  EXPECT_EQ(problem("/dev/null"),
            "train x: --save /dev/null is a character device, not a regular file (tlaloc writes "
            "only regular files)");
  EXPECT_EQ(problem("/dev/null", OutputMode::append),
            "train x: --save /dev/null is a character device, not a regular file (tlaloc writes "
            "only regular files)");
  testing::write_bytes(dir.file("file"), {});
  EXPECT_EQ(problem(dir.file("file/m.st")), "train x: --save " + dir.file("file/m.st") + ": " +
                                                dir.file("file") + " is not a folder");
  EXPECT_EQ(problem(dir.file("m.st")), "(no error)");
  EXPECT_EQ(problem(dir.file("file"), OutputMode::append), "(no error)");
  if (::geteuid() != 0) {  // root writes read-only folders and files
    fs::create_directory(dir.file("ro"));
    ::chmod(dir.file("ro").c_str(), 0555);
    EXPECT_EQ(problem(dir.file("ro/m.st")), "train x: --save " + dir.file("ro/m.st") + ": folder " +
                                                dir.file("ro") +
                                                " is not writable: Permission denied");
    ::chmod(dir.file("file").c_str(), 0444);
    EXPECT_EQ(problem(dir.file("file"), OutputMode::append),
              "train x: --save " + dir.file("file") + " is not writable: Permission denied");
  }
}

}  // namespace
}  // namespace tlaloc::io

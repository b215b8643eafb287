// Crash safety: a child process saving a checkpoint is SIGKILLed at many points (after k
// bytes, at every stage of the commit, and at random times); the checkpoint on disk must
// always load and be either the previous one or the complete new one.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <random>

#include "io/io_test_util.h"
#include "tlaloc/io/checkpoint.h"

namespace tlaloc::io {
namespace {

using testing::ScratchDir;

// A ~2 MiB checkpoint whose contents identify its version.
Checkpoint version(int v) {
  Checkpoint c;
  std::vector<float> w(1 << 19);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(v) + float(i % 1000) * 1e-3f;
  c.params.emplace_back("layer.weight", Array::from<float>(Shape{int64_t(w.size())}, w));
  c.params.emplace_back("layer.bias", Array::filled(DType::f32, Shape{7}, v));
  c.optimizer = "adam";
  c.optimizer_state.emplace_back("optimizer.exp_avg.layer.bias",
                                 Array::filled(DType::f32, Shape{7}, -v));
  c.step = 1000 * v;
  return c;
}

// Which version the file holds; fails the test if it does not load or is mixed.
int version_on_disk(const std::string& path) {
  Checkpoint c = load_checkpoint(path);
  int v = int(c.step / 1000);
  Checkpoint want = version(v);
  auto params = restore_params(
      c, {{"layer.weight", DType::f32, Shape{1 << 19}}, {"layer.bias", DType::f32, Shape{7}}});
  EXPECT_TRUE(params[0].bitwise_equal(want.params[0].second)) << path << " version " << v;
  EXPECT_TRUE(params[1].bitwise_equal(want.params[1].second)) << path << " version " << v;
  return v;
}

// Forks a child that runs `save` and kills itself (SIGKILL) when `kill_at` says so.
void run_killed_child(const std::function<void(const SaveOptions&)>& save,
                      const std::function<bool(SaveStage, uint64_t)>& kill_at) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    SaveOptions o;
    o.chunk_bytes = 64 << 10;
    o.progress = [&](SaveStage s, uint64_t bytes) {
      if (kill_at(s, bytes)) raise(SIGKILL);
    };
    try {
      save(o);
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
      << "child failed with status " << status;
}

TEST(AtomicSave, KilledAfterKBytesLeavesThePreviousCheckpoint) {
  ScratchDir dir;
  std::string p = dir.file("model.safetensors");
  save_checkpoint(p, version(1));
  const uint64_t total = std::filesystem::file_size(p);
  std::vector<uint64_t> ks = {0, 1, 8, 64 << 10, total / 2, total - 1, total};
  for (int i = 1; i <= 30; ++i) ks.push_back(total * uint64_t(i) / 31);
  int killed = 0;
  for (uint64_t k : ks) {
    run_killed_child([&](const SaveOptions& o) { save_checkpoint(p, version(2), o); },
                     [&](SaveStage s, uint64_t bytes) {
                       return (s == SaveStage::wrote || s == SaveStage::temp_created) && bytes >= k;
                     });
    ++killed;
    EXPECT_EQ(version_on_disk(p), 1) << "killed after " << k << " of " << total << " bytes";
  }
  EXPECT_EQ(killed, int(ks.size()));
}

TEST(AtomicSave, KilledAtEachCommitStage) {
  ScratchDir dir;
  std::string p = dir.file("model.safetensors");
  save_checkpoint(p, version(1));
  struct Case {
    SaveStage stage;
    int expect;
  };
  for (Case c : {Case{SaveStage::temp_created, 1}, Case{SaveStage::file_synced, 1},
                 Case{SaveStage::renamed, 2}, Case{SaveStage::dir_synced, 2}}) {
    save_checkpoint(p, version(1));
    run_killed_child([&](const SaveOptions& o) { save_checkpoint(p, version(2), o); },
                     [&](SaveStage s, uint64_t) { return s == c.stage; });
    EXPECT_EQ(version_on_disk(p), c.expect) << "stage " << int(c.stage);
  }
}

TEST(AtomicSave, RotatingFolderKilledAtRandomTimes) {
  ScratchDir dir;
  std::string d = dir.file("ckpts");
  save_checkpoint_in(d, version(1), 2);
  std::mt19937 rng(7);
  int last_good = 1;
  for (int round = 0; round < 24; ++round) {
    int v = last_good + 1;
    // Kill at a random byte count or stage of this save; the folder's newest checkpoint must
    // load and be the previous version or this one.
    uint64_t k = rng() % (std::filesystem::file_size(*latest_checkpoint(d)) + 1);
    int stage = int(rng() % 6);
    run_killed_child([&](const SaveOptions& o) { save_checkpoint_in(d, version(v), 2, o); },
                     [&](SaveStage s, uint64_t bytes) {
                       if (stage < 5)
                         return int(s) == stage && (s != SaveStage::wrote || bytes >= k);
                       return false;  // completes
                     });
    auto latest = latest_checkpoint(d);
    ASSERT_TRUE(latest.has_value());
    int got = version_on_disk(*latest);
    EXPECT_TRUE(got == last_good || got == v) << "round " << round << " found " << got;
    last_good = got;
  }
  EXPECT_LE(list_checkpoints(d).size(), 3u);  // rotation runs after each completed save
}

}  // namespace
}  // namespace tlaloc::io

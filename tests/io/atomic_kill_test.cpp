// Crash safety: a child process saving a checkpoint is SIGKILLed at many points (after k
// bytes, at every stage of the commit, and at random times); the checkpoint on disk must
// always load and be either the previous one or the complete new one. The same for a model
// directory (several files replaced as one folder), killed at every point of its save.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <random>

#include "io/io_test_util.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/hf_dir.h"

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

// Version v of a model directory: ~400 KB of weights identifying v, config {"version": v}; odd
// versions in shards of 128 KB, even ones as one file.
void save_model_version(const std::string& dir, int v, const SaveOptions& o) {
  NamedArrays w;
  std::vector<float> a(1 << 16);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(v) + float(i % 1000) * 1e-3f;
  w.emplace_back("a", Array::from<float>(Shape{int64_t(a.size())}, a));
  w.emplace_back("b", Array::filled(DType::bf16, Shape{1 << 16}, v));
  w.emplace_back("c", Array::filled(DType::f16, Shape{1 << 16}, -v));
  HfSaveOptions opt;
  opt.max_shard_bytes = v % 2 ? 128 << 10 : kHfMaxShardBytes;
  opt.save = o;
  save_hf_dir(dir, {{"version", v}}, w, opt);
}

// Which version the directory holds; fails the test if it does not load or is mixed.
int model_version_on_disk(const std::string& dir) {
  const HfModelDir d = HfModelDir::open(dir);
  const int v = d.config().at("version").get<int>();
  save_model_version(dir + ".want", v, {});
  const HfModelDir w = HfModelDir::open(dir + ".want");
  EXPECT_EQ(d.sharded(), v % 2 == 1) << dir << " version " << v;
  EXPECT_EQ(d.tensors().size(), w.tensors().size());
  for (const TensorView& t : w.tensors())
    EXPECT_TRUE(to_array(d.at(t.name)).bitwise_equal(to_array(t))) << t.name << " version " << v;
  return v;
}

bool has_staging_folder(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".saving.") != std::string::npos) return true;
  return false;
}

// Killed at every progress event of a save (sharded -> one file, one file -> sharded): the folder
// is the previous version until the new one has taken its name (the last event), then the new.
TEST(AtomicSave, ModelDirectoryKilledAtEveryPointIsTheOldOrTheNewOne) {
  ScratchDir tmp;
  const std::string dir = tmp.file("m");
  SaveOptions small;
  small.chunk_bytes = 64 << 10;
  for (int from : {1, 2}) {
    const int to = from + 1;
    int events = 0;
    SaveOptions count = small;
    count.progress = [&](SaveStage, uint64_t) { ++events; };
    save_model_version(tmp.file("count"), from, {});
    save_model_version(tmp.file("count"), to, count);
    ASSERT_GT(events, 10);
    for (int k = 0; k < events; ++k) {
      save_model_version(dir, from, {});
      int seen = 0;
      run_killed_child([&](const SaveOptions& o) { save_model_version(dir, to, o); },
                       [&](SaveStage, uint64_t) { return seen++ == k; });
      EXPECT_EQ(model_version_on_disk(dir), k == events - 1 ? to : from) << "killed at " << k;
    }
  }
  // The last kill left the previous folder under its staging name; the next save removes it.
  EXPECT_TRUE(has_staging_folder(tmp.path()));
  save_model_version(dir, 4, {});
  EXPECT_FALSE(has_staging_folder(tmp.path()));
}

}  // namespace
}  // namespace tlaloc::io

// A run trained N steps, saved, restored in a new process and continued M steps ends bitwise
// identical (parameters, moments, step, losses) to an uninterrupted N+M run (Adam, as disc).
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/train_test_util.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/train/checkpointing.h"

using namespace tlaloc;
using namespace tlaloc::train;
namespace disc = tlaloc::recipes::disc;

namespace {

constexpr int64_t kPoints = 64;

struct TrainRun {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<Trainer> trainer;
};

TrainRun make_run(uint64_t init_seed) {
  TrainRun r;
  r.model = disc::make_model();
  r.model->init(random::key(init_seed));
  TrainerOptions o;
  o.schedule = optim::parse_schedule("warmup-cosine", 30, 5);
  r.trainer = std::make_unique<Trainer>(*r.model, disc::mse_loss_fn(), disc::data_inputs(kPoints),
                                        optim::Adam{.lr = 0.02, .amsgrad = true}, o);
  disc::Data d = disc::make_data(random::key(7), kPoints);
  r.trainer->set_resident("x", d.x);
  r.trainer->set_resident("y", d.y);
  return r;
}

}  // namespace

constexpr int N = 12, M = 18;

// Run by SaveRestoreInNewProcessIsBitwiseIdentical in a child process.
TEST(Resume, DISABLED_ChildTrainsAndSaves) {
  const char* dir = std::getenv("TLALOC_RESUME_DIR");
  ASSERT_NE(dir, nullptr);
  TrainRun r = make_run(1);
  auto l = train_test::step_losses(*r.trainer, N);
  io::save_checkpoint(std::string(dir) + "/a.safetensors",
                      to_checkpoint(*r.trainer, 1, r.trainer->steps_taken()));
  std::ofstream f(std::string(dir) + "/losses.txt");
  f.precision(17);
  for (double v : l) f << v << "\n";
}

TEST(Resume, SaveRestoreInNewProcessIsBitwiseIdentical) {
  auto dir = std::filesystem::temp_directory_path() / ("tlaloc_resume_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string ckpt = (dir / "a.safetensors").string();
  std::string loss_file = (dir / "losses.txt").string();

  // The first N steps run in a new process: this test binary, re-executed on the child test.
  std::string filter = "--gtest_filter=Resume.DISABLED_ChildTrainsAndSaves";
  std::string also = "--gtest_also_run_disabled_tests";
  std::string env = "TLALOC_RESUME_DIR=" + dir.string();
  char* argv[] = {const_cast<char*>("/proc/self/exe"), filter.data(), also.data(), nullptr};
  char* envp[] = {env.data(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child run failed";

  // Uninterrupted run.
  TrainRun full = make_run(1);
  auto full_losses = train_test::step_losses(*full.trainer, N + M);

  // Restored into a model initialised differently: every value must come from the file.
  TrainRun resumed = make_run(99);
  restore(*resumed.trainer, io::load_checkpoint(ckpt));
  EXPECT_EQ(resumed.trainer->steps_taken(), N);
  auto rest = train_test::step_losses(*resumed.trainer, M);

  std::ifstream f(loss_file);
  for (int i = 0; i < N; ++i) {
    double v;
    f >> v;
    EXPECT_EQ(v, full_losses[size_t(i)]) << "step " << i;
  }
  for (int i = 0; i < M; ++i)
    EXPECT_EQ(rest[size_t(i)], full_losses[size_t(N + i)]) << "step " << N + i;
  train_test::expect_same_state(*full.trainer, *resumed.trainer);
  EXPECT_EQ(full.trainer->optimizer_step(), N + M);
  std::filesystem::remove_all(dir);
}

TEST(Resume, MismatchedCheckpointListsEveryProblem) {
  auto dir =
      std::filesystem::temp_directory_path() / ("tlaloc_resume2_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string ckpt = (dir / "b.safetensors").string();
  TrainRun r = make_run(1);
  io::Checkpoint c = to_checkpoint(*r.trainer, 1, 0);
  c.params.erase(c.params.begin());                                   // missing 0.weight
  c.params.push_back({"extra.weight", Array(DType::f32, Shape{2})});  // unexpected
  c.params[0].second = Array(DType::f32, Shape{3});                   // 0.bias mismatched
  io::save_checkpoint(ckpt, c);
  try {
    restore(*r.trainer, io::load_checkpoint(ckpt));
    FAIL() << "restore accepted a mismatched checkpoint";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("0.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("extra.weight"), std::string::npos) << m;
    EXPECT_NE(m.find("0.bias"), std::string::npos) << m;
  }
  std::filesystem::remove_all(dir);
}

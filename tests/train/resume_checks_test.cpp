// What a run checks before it resumes from a checkpoint (train::check_resumable, through fit):
// finite numbers in every floating-point dtype, Adam's second moments >= 0, and a step count
// that agrees with itself (the metadata's step minus skipped steps == the "optimizer.step"
// tensor), each refusal naming the tensor; skipped steps are recorded and accepted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "support/error_of.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/fit.h"

using namespace tlaloc;
using namespace tlaloc::train;
namespace disc = tlaloc::recipes::disc;
using tlaloc::testing::error_of;

namespace {

// Parameters "w" (f64) and "b" (bf16), Adam state (amsgrad) and the step count: a
// well-formed checkpoint at step 7.
io::Checkpoint sample() {
  io::Checkpoint c;
  c.params.emplace_back("w", Array::filled(DType::f64, Shape{3}, 0.5));
  c.params.emplace_back("b", Array::filled(DType::bf16, Shape{2}, 1.0));
  c.optimizer = "adam";
  for (const char* p : {"w", "b"})
    for (const char* kind : {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"})
      c.optimizer_state.emplace_back(fmt::format("optimizer.{}.{}", p, kind),
                                     Array::filled(DType::f32, Shape{p[0] == 'w' ? 3 : 2}, 0.25));
  c.optimizer_state.emplace_back("optimizer.step", Array::scalar(int32_t(7)));
  c.step = 7;
  return c;
}

Array& tensor(io::Checkpoint& c, const std::string& name) {
  for (auto* arrays : {&c.params, &c.optimizer_state})
    for (auto& [n, a] : *arrays)
      if (n == name) return a;
  throw std::runtime_error("no tensor " + name);
}

std::string problem(const io::Checkpoint& c) {
  return error_of([&] { check_resumable(c, "--resume f.st"); });
}

TEST(CheckResumable, NonFiniteValuesOfEveryFloatDTypeAreNamed) {
  EXPECT_EQ(problem(sample()), "(no error)");
  io::Checkpoint c = sample();
  tensor(c, "w").data<double>()[1] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(problem(c),
            "--resume f.st: tensor 'w' holds 1 NaN or inf values of 3 (a diverged run or a "
            "damaged file)");
  c = sample();
  tensor(c, "b").data<uint16_t>()[0] = f32_to_bf16(NAN);
  EXPECT_EQ(problem(c),
            "--resume f.st: tensor 'b' holds 1 NaN or inf values of 2 (a diverged run or a "
            "damaged file)");
  c = sample();
  tensor(c, "optimizer.b.exp_avg").data<float>()[1] = -INFINITY;
  EXPECT_NE(problem(c).find("tensor 'optimizer.b.exp_avg' holds 1 NaN or inf"), std::string::npos);
}

TEST(CheckResumable, NegativeSecondMomentsAreNamed) {
  for (const char* name : {"optimizer.w.exp_avg_sq", "optimizer.b.max_exp_avg_sq"}) {
    io::Checkpoint c = sample();
    tensor(c, name).data<float>()[0] = -1e-30f;
    EXPECT_EQ(problem(c), fmt::format("--resume f.st: tensor '{}' holds 1 negative values of {} "
                                      "(a second moment is never negative: a damaged file)",
                                      name, tensor(c, name).numel()));
  }
  io::Checkpoint c = sample();
  tensor(c, "optimizer.w.exp_avg").data<float>()[0] = -1;  // first moments may be negative
  tensor(c, "optimizer.w.exp_avg_sq").data<float>()[0] = -0.0f;
  EXPECT_EQ(problem(c), "(no error)");
}

TEST(CheckResumable, TheStepCountMustAgreeWithItself) {
  io::Checkpoint c = sample();
  c.step = 5;  // an edited metadata step
  EXPECT_EQ(problem(c),
            "--resume f.st: its metadata says step 5, but tensor 'optimizer.step' holds 7 (the "
            "updates applied): an edited or damaged file");
  c = sample();
  c.optimizer_state.pop_back();
  EXPECT_EQ(problem(c),
            "--resume f.st: its metadata says step 7, but it has no tensor 'optimizer.step' (the "
            "updates applied)");
  c = sample();
  c.step = 9;
  c.skipped_steps = 2;  // two updates skipped for non-finite gradients
  EXPECT_EQ(problem(c), "(no error)");
  c.skipped_steps = 0;
  EXPECT_EQ(problem(c),
            "--resume f.st: its metadata says step 9, but tensor 'optimizer.step' holds 7 (the "
            "updates applied): an edited or damaged file");
  c.step = 7;
  c.skipped_steps = -2;  // step - skipped would match a larger count than the steps taken
  EXPECT_EQ(problem(c),
            "--resume f.st: its metadata says -2 of its 7 steps were skipped: an edited or "
            "damaged file");
}

// A trainer 3 steps in whose optimizer applied 1 update (2 skipped for non-finite gradients)
// saves the skipped steps; its checkpoint resumes; edited, it is refused by fit before any step.
TEST(CheckResumable, SkippedStepsAreRecordedAndAnEditedFileIsRefusedByFit) {
  auto dir = std::filesystem::temp_directory_path() / ("tlaloc_rc_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto make = [] {
    auto m = disc::make_model();
    m->init(random::key(1));
    auto t = std::make_unique<Trainer>(*m, disc::mse_loss_fn(), disc::data_inputs(16),
                                       optim::Adam{.lr = 0.02});
    disc::Data d = disc::make_data(random::key(2), 16);
    t->set_resident("x", d.x);
    t->set_resident("y", d.y);
    return std::make_pair(m, std::move(t));
  };
  auto [m1, first] = make();
  std::vector<Array> params, state;
  for (auto& [n, a] : first->named_parameters()) params.push_back(a);
  for (auto& [n, a] : first->optimizer_state())
    state.push_back(n == "optimizer.step" ? Array::scalar(int32_t(1)) : a);
  first->load_state(params, state, 3);
  io::Checkpoint c = to_checkpoint(*first, 5, 3);
  EXPECT_EQ(c.skipped_steps, 2);
  io::save_checkpoint((dir / "a.st").string(), c);
  c = io::load_checkpoint((dir / "a.st").string());
  EXPECT_EQ(c.skipped_steps, 2);
  EXPECT_EQ(problem(c), "(no error)");

  FitOptions o;
  o.name = "test";
  o.steps = 4;
  o.progress = false;
  o.handle_signals = false;
  o.seed = 5;
  char* buf = nullptr;
  size_t len = 0;
  o.out = open_memstream(&buf, &len);
  o.resume = (dir / "a.st").string();
  auto [m2, resumed] = make();
  EXPECT_EQ(fit(*resumed, o, {}).steps, 4);

  c.skipped_steps = 0;  // as if the metadata were edited
  io::save_checkpoint((dir / "edited.st").string(), c);
  auto [m3, refused] = make();
  o.resume = (dir / "edited.st").string();
  o.save = (dir / "b.st").string();
  EXPECT_EQ(error_of([&] { fit(*refused, o, {}); }),
            "--resume " + *o.resume +
                ": its metadata says step 3, but tensor 'optimizer.step' holds 1 (the updates "
                "applied): an edited or damaged file");
  EXPECT_EQ(refused->steps_taken(), 0);
  EXPECT_FALSE(std::filesystem::exists(*o.save));
  std::fclose(o.out);
  std::free(buf);
  std::filesystem::remove_all(dir);
}

}  // namespace

// Checkpoints: metadata round trips exactly, strict restore lists every problem, params-only
// files, folder rotation.
#include "tlaloc/io/checkpoint.h"

#include <gtest/gtest.h>

#include "io/io_test_util.h"
#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {
namespace {

using testing::error_of;
using testing::ScratchDir;

Checkpoint sample(int64_t step) {
  Checkpoint c;
  c.params.emplace_back("0.weight", Array::from<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6}));
  c.params.emplace_back("0.bias", Array::from<float>(Shape{3}, {-1, 0, 1}));
  c.params.emplace_back("2.weight", Array::from<double>(Shape{1}, {0.1}));
  c.optimizer = "adamw";
  c.optimizer_state.emplace_back("optimizer.exp_avg.0.weight", Array(DType::f32, Shape{2, 3}));
  c.optimizer_state.emplace_back("optimizer.exp_avg_sq.0.weight",
                                 Array::filled(DType::f32, Shape{2, 3}, 0.25));
  c.optimizer_state.emplace_back("optimizer.step", Array::from<int32_t>(Shape{}, {7}));
  c.hyper_parameters = {{"lr", exact(0.02)},
                        {"betas", "0.9,0.999"},
                        {"eps", exact(1e-8)},
                        {"weight_decay", exact(0.01)}};
  c.step = step;
  c.seed = 20260921;
  c.data_position = 4096;
  c.user = {{"run", "disc"}, {"note", "caf\xc3\xa9"}};
  return c;
}

std::vector<TensorSpec> param_specs() {
  return {{"0.weight", DType::f32, Shape{2, 3}},
          {"0.bias", DType::f32, Shape{3}},
          {"2.weight", DType::f64, Shape{1}}};
}

TEST(Checkpoint, RoundTripsEverything) {
  ScratchDir dir;
  std::string p = dir.file("c.safetensors");
  Checkpoint c = sample((int64_t(1) << 53) + 1);  // not representable as a double
  save_checkpoint(p, c);
  Checkpoint r = load_checkpoint(p);
  EXPECT_EQ(r.step, (int64_t(1) << 53) + 1);
  EXPECT_EQ(r.seed, 20260921u);
  EXPECT_EQ(r.data_position, 4096);
  EXPECT_EQ(r.optimizer, "adamw");
  EXPECT_EQ(r.hyper_parameters, c.hyper_parameters);
  EXPECT_EQ(parse_double(r.hyper_parameters.at("lr"), "lr"), 0.02);
  EXPECT_EQ(parse_double(r.hyper_parameters.at("eps"), "eps"), 1e-8);
  EXPECT_EQ(r.user, c.user);
  EXPECT_EQ(r.tlaloc_version, TLALOC_VERSION);
  auto params = restore_params(r, param_specs());
  ASSERT_EQ(params.size(), 3u);
  EXPECT_TRUE(params[0].bitwise_equal(c.params[0].second));
  EXPECT_TRUE(params[1].bitwise_equal(c.params[1].second));
  EXPECT_TRUE(params[2].bitwise_equal(c.params[2].second));
  auto state =
      restore_optimizer_state(r, {{"optimizer.step", DType::s32, Shape{}},
                                  {"optimizer.exp_avg_sq.0.weight", DType::f32, Shape{2, 3}},
                                  {"optimizer.exp_avg.0.weight", DType::f32, Shape{2, 3}}});
  EXPECT_EQ(state[0].at(0), 7.0);
  EXPECT_EQ(state[1].at(5), 0.25);
  // The file is plain safetensors: metadata as strings, the step exact.
  SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_EQ(f.metadata().at("step"), "9007199254740993");
  EXPECT_EQ(f.metadata().at("optimizer.lr"), "0.02");
  EXPECT_EQ(f.metadata().at("user.run"), "disc");
  EXPECT_EQ(
      f.metadata().at("optimizer_state"),
      "[\"optimizer.exp_avg.0.weight\",\"optimizer.exp_avg_sq.0.weight\",\"optimizer.step\"]");
}

TEST(Checkpoint, StepCountsPastFloat32AndToInt64Max) {
  ScratchDir dir;
  for (int64_t step : {int64_t(0), (int64_t(1) << 24) + 1, INT64_MAX}) {
    Checkpoint c;
    c.params.emplace_back("w", Array(DType::f32, Shape{1}));
    c.step = step;
    c.seed = UINT64_MAX;
    save_checkpoint(dir.file("s.safetensors"), c);
    Checkpoint r = load_checkpoint(dir.file("s.safetensors"));
    EXPECT_EQ(r.step, step);
    EXPECT_EQ(r.seed, UINT64_MAX);
  }
}

TEST(Checkpoint, RestoreListsEveryMismatchByName) {
  ScratchDir dir;
  save_checkpoint(dir.file("c.safetensors"), sample(10));
  Checkpoint r = load_checkpoint(dir.file("c.safetensors"));
  std::string msg = error_of([&] {
    restore_params(r, {{"0.weight", DType::f32, Shape{3, 2}},  // shape differs
                       {"0.bias", DType::bf16, Shape{3}},      // dtype differs
                       {"1.weight", DType::f32, Shape{4}},     // missing
                       {"1.bias", DType::f32, Shape{4}}});     // missing; 2.weight unexpected
  });
  for (const char* part :
       {"c.safetensors", "missing 2 ('1.weight', '1.bias')", "unexpected 1 ('2.weight')",
        "'0.weight': file f32[2,3], expected f32[3,2]", "'0.bias': file f32[3], expected bf16[3]"})
    EXPECT_NE(msg.find(part), std::string::npos) << msg << "\n  lacks: " << part;
  // Optimizer state names do not count as parameters, and vice versa.
  msg = error_of([&] { restore_optimizer_state(r, param_specs()); });
  EXPECT_NE(msg.find("missing 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'optimizer.step'"), std::string::npos) << msg;
}

TEST(Checkpoint, ParamsOnlyFileIsLegalAndRefusesStateByName) {
  ScratchDir dir;
  Checkpoint c;
  c.params.emplace_back("0.weight", Array::from<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6}));
  c.params.emplace_back("0.bias", Array::from<float>(Shape{3}, {-1, 0, 1}));
  c.params.emplace_back("2.weight", Array::from<double>(Shape{1}, {0.1}));
  c.step = 3;
  save_checkpoint(dir.file("p.safetensors"), c);
  Checkpoint r = load_checkpoint(dir.file("p.safetensors"));
  EXPECT_FALSE(r.has_optimizer_state());
  EXPECT_EQ(restore_params(r, param_specs()).size(), 3u);
  std::string msg = error_of([&] {
    restore_optimizer_state(r, {{"optimizer.exp_avg.0.weight", DType::f32, Shape{2, 3}}});
  });
  EXPECT_NE(msg.find("parameters only"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'optimizer.exp_avg.0.weight'"), std::string::npos) << msg;

  // A safetensors file from elsewhere (no tlaloc metadata) loads as parameters, step 0.
  save_safetensors(dir.file("plain.safetensors"), {{"w", Array::from<float>(Shape{1}, {2.0f})}},
                   {{"format", "pt"}});
  Checkpoint plain = load_checkpoint(dir.file("plain.safetensors"));
  EXPECT_EQ(plain.step, 0);
  EXPECT_FALSE(plain.has_optimizer_state());
  EXPECT_EQ(restore_params(plain, {{"w", DType::f32, Shape{1}}})[0].at(0), 2.0);
}

TEST(Checkpoint, RefusesBadInputByName) {
  ScratchDir dir;
  Checkpoint c;
  c.params.emplace_back("w", Array(DType::f32, Shape{1}));
  c.optimizer_state.emplace_back("optimizer.m", Array(DType::f32, Shape{1}));
  EXPECT_NE(error_of([&] {
              save_checkpoint(dir.file("x.safetensors"), c);
            }).find("without an optimizer kind"),
            std::string::npos);
  c.optimizer = "sgd";
  c.optimizer_state[0].first = "w";
  EXPECT_NE(error_of([&] {
              save_checkpoint(dir.file("x.safetensors"), c);
            }).find("two tensors are named 'w'"),
            std::string::npos);
  // Malformed step / unsupported dtypes in the file, all listed.
  save_safetensors(dir.file("bad.safetensors"), {{"w", Array(DType::f32, Shape{1})}},
                   {{"step", "12.5"}});
  EXPECT_NE(error_of([&] {
              load_checkpoint(dir.file("bad.safetensors"));
            }).find("'step' is \"12.5\", not a decimal integer"),
            std::string::npos);
  std::vector<std::byte> b8(8);
  save_safetensors(dir.file("i64.safetensors"),
                   {TensorRef{"a", StDType::I64, {1}, b8}, TensorRef{"b", StDType::U8, {8}, b8}});
  std::string msg = error_of([&] { load_checkpoint(dir.file("i64.safetensors")); });
  EXPECT_NE(msg.find("'a' (I64), 'b' (U8)"), std::string::npos) << msg;
  // An optimizer_state list naming an absent tensor.
  save_safetensors(dir.file("ghost.safetensors"), {{"w", Array(DType::f32, Shape{1})}},
                   {{"optimizer", "adam"}, {"optimizer_state", "[\"optimizer.m\"]"}});
  EXPECT_NE(error_of([&] {
              load_checkpoint(dir.file("ghost.safetensors"));
            }).find("'optimizer.m' is listed but not in the file"),
            std::string::npos);
}

TEST(CheckpointDir, RotationKeepsTheNewest) {
  ScratchDir dir;
  std::string d = dir.file("run/ckpts");
  EXPECT_EQ(latest_checkpoint(d), std::nullopt);
  for (int64_t step : {100, 200, 300, 1000, 1500})
    EXPECT_EQ(save_checkpoint_in(d, sample(step), /*keep_last=*/3), checkpoint_path(d, step));
  auto all = list_checkpoints(d);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].first, 300);
  EXPECT_EQ(all[1].first, 1000);
  EXPECT_EQ(all[2].first, 1500);
  EXPECT_EQ(checkpoint_path(d, 300), d + "/ckpt-000300.safetensors");
  EXPECT_EQ(checkpoint_path(d, 12345678), d + "/ckpt-12345678.safetensors");
  EXPECT_EQ(latest_checkpoint(d), d + "/ckpt-001500.safetensors");
  EXPECT_EQ(load_checkpoint(*latest_checkpoint(d)).step, 1500);
  // Files that merely look similar are neither listed nor deleted; stale temporaries are.
  testing::write_bytes(d + "/ckpt-7.safetensors", {});
  testing::write_bytes(d + "/notes.txt", {});
  testing::write_bytes(d + "/.ckpt-002000.safetensors.tmp.AbC123", {});
  save_checkpoint_in(d, sample(2000), 2);
  all = list_checkpoints(d);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 1500);
  EXPECT_TRUE(std::filesystem::exists(d + "/ckpt-7.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(d + "/notes.txt"));
  EXPECT_FALSE(std::filesystem::exists(d + "/.ckpt-002000.safetensors.tmp.AbC123"));
  // Saving an older step (a resumed run) never deletes the file just written.
  save_checkpoint_in(d, sample(5), 1);
  EXPECT_TRUE(std::filesystem::exists(checkpoint_path(d, 5)));
}

}  // namespace
}  // namespace tlaloc::io

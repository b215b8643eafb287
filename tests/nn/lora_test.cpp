// LoRA (nn/lora.h) on tiny Llama models against an independent PyTorch implementation of PEFT's
// lora.Linear written in tests/nn/llama_torch.py from Hu et al. 2021 (logits, and the loss's
// gradient for the adapters and every base weight), the merged model against the unmerged one,
// what add_lora adapts and refuses, and a Trainer run that leaves the base model bitwise as it
// was.
#include <sys/wait.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "nn/llama_util.h"
#include "support/error_of.h"
#include "tlaloc/io/safetensors.h"
#include "tlaloc/nn/layers.h"
#include "tlaloc/nn/lora.h"
#include "tlaloc/train/trainer.h"

using namespace tlaloc;
using namespace tlaloc::llama_test;
using tlaloc::testing::error_of;

namespace {

constexpr int64_t kBatch = 2, kSeq = 12;

// B drawn N(0, 0.3²) instead of PEFT's zeros, so that A's gradient and the adapter's term in
// the logits are not 0.
void randomize_b(nn::Module& m, uint64_t seed) {
  uint32_t i = 0;
  for (auto& p : m.named_parameters())
    if (p.name.ends_with(".lora_B.weight")) {
      Array& v = p.param->value;
      Array r = random::normal(random::fold_in(random::key(seed), i++), v.shape());
      for (float& x : r.span<float>()) x *= 0.3f;
      v = r.astype(v.dtype());
    }
}

struct Case {
  std::string name;
  LlamaConfig c;
  nn::LoraConfig lora;
  DType dtype = DType::f32;
};

std::vector<Case> cases() {
  nn::LoraConfig qv{.r = 4, .lora_alpha = 8};  // PEFT's default targets q_proj, v_proj
  nn::LoraConfig all{.r = 2, .lora_alpha = 4, .use_rslora = true, .target_modules = {"all-linear"}};
  nn::LoraConfig mlp{.r = 3, .lora_alpha = 5, .target_modules = {"up_proj", "o_proj"}};
  return {{"qv_gqa_untied", tiny(4, 2, false), qv},
          {"all_linear_rslora_mha_tied", tiny(4, 4, true), all},
          {"up_o_llama3_mqa", with_llama3(tiny(4, 1, false)), mlp},
          {"f64_all_linear_rslora_gqa", tiny(4, 2, false), all, DType::f64}};
}

// The model of `k` with adapters (A from key 7, B random), parameters in k.dtype.
std::unique_ptr<LlamaForCausalLM> make(const Case& k, uint64_t seed) {
  auto m = std::make_unique<LlamaForCausalLM>(k.c);
  randomize(*m, seed, DType::f32);
  nn::add_lora(*m, k.lora, random::key(7));
  randomize_b(*m, seed + 1);
  for (auto& p : m->named_parameters()) p.param->value = p.param->value.astype(k.dtype);
  return m;
}

TEST(LoraTorch, LogitsAndGradientsEqualPeftEquationsInPyTorch) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is needed";
  io::testing::ScratchDir dir;
  const std::vector<Case> all = cases();
  std::vector<std::unique_ptr<LlamaForCausalLM>> models;
  const Array ids = tokens(kBatch, kSeq, 61);
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& k = all[i];
    auto& m = models.emplace_back(make(k, 200 + i));
    std::vector<std::pair<std::string, Array>> t{{"input_ids", ids}};
    for (auto& p : m->named_parameters()) t.emplace_back(p.name, p.param->value);
    io::save_safetensors(dir.file(k.name + ".in.safetensors"), t,
                         {{"config", nn::models::to_json(k.c).dump()},
                          {"dtype", k.dtype == DType::f64 ? "float64" : "float32"},
                          {"grad", "1"},
                          {"lora_scaling", fmt::format("{:.17g}", k.lora.scaling())}});
  }
  run_llama_torch(dir.path());
  if (HasFatalFailure()) return;
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& k = all[i];
    SCOPED_TRACE(k.name);
    LlamaForCausalLM& m = *models[i];
    auto out = io::SafetensorsFile::open(dir.file(k.name + ".out.safetensors"));
    const bool is64 = k.dtype == DType::f64;
    const double tol_logits = is64 ? 1e-12 : 1e-5, tol_grads = is64 ? 1e-11 : 1e-4;
    EXPECT_LE(rel_err(logits(m, ids), io::to_array(out.at("logits"))), tol_logits);
    std::vector<Array> lg = loss_and_grads(m, ids);
    EXPECT_LE(rel_err(lg[0], io::to_array(out.at("loss"))), tol_logits);
    auto params = m.named_parameters();
    int adapters = 0;
    double worst = 0;
    for (size_t p = 0; p < params.size(); ++p) {
      double e = rel_err(lg[1 + p], io::to_array(out.at("grad." + params[p].name)));
      EXPECT_LE(e, tol_grads) << params[p].name;
      worst = std::max(worst, e);
      adapters += params[p].name.find(".lora_") != std::string::npos;
    }
    EXPECT_GT(adapters, 0);
    std::printf("  %-30s %d adapter tensors, gradients max rel err %.3g\n", k.name.c_str(),
                adapters, worst);
  }
}

// W + scaling · B A in place of the adapters: the same logits.
TEST(Lora, MergedModelGivesTheUnmergedLogits) {
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    auto m = make(k, 300);
    const Array ids = tokens(kBatch, kSeq, 61);
    const Array want = logits(*m, ids);
    auto merged = nn::merged_lora_weights(*m);
    LlamaForCausalLM plain(k.c);
    std::map<std::string, Array> values;
    for (auto& p : m->named_parameters()) values[p.name] = p.param->value;
    for (auto& [name, w] : merged) values[name] = w;
    for (auto& p : plain.named_parameters()) p.param->value = values.at(p.name);
    EXPECT_LE(rel_err(logits(plain, ids), want), k.dtype == DType::f64 ? 1e-13 : 1e-5);
  }
}

TEST(Lora, AddLoraAdaptsTheTargetsAndFreezesTheRest) {
  LlamaForCausalLM m(tiny(4, 2, false));
  randomize(m, 5);
  const Array ids = tokens(kBatch, kSeq, 61);
  const Array before = logits(m, ids);
  auto names = nn::add_lora(m, {.r = 4, .lora_alpha = 16}, random::key(1));
  EXPECT_EQ(names, (std::vector<std::string>{
                       "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj",
                       "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.v_proj"}));
  EXPECT_EQ(nn::lora_modules(m), names);
  int trained = 0;
  for (auto& p : m.named_parameters()) {
    const bool adapter = p.name.find(".lora_") != std::string::npos;
    EXPECT_EQ(p.param->requires_grad, adapter) << p.name;
    trained += adapter;
    if (p.name == "model.layers.0.self_attn.q_proj.lora_A.weight") {
      EXPECT_EQ(p.param->value.shape(), (Shape{4, 32}));
    }
    if (p.name == "model.layers.0.self_attn.v_proj.lora_B.weight") {
      EXPECT_EQ(p.param->value.shape(), (Shape{16, 4}));  // 2 kv heads of 8
      for (double v : p.param->value.to_doubles()) EXPECT_EQ(v, 0);
    }
  }
  EXPECT_EQ(trained, 8);
  // B = 0: the adapted model computes the base model's logits.
  EXPECT_LE(rel_err(logits(m, ids), before), 1e-6);

  LlamaForCausalLM n(tiny(4, 2, false));
  auto all = nn::add_lora(n, {.target_modules = {"all-linear"}}, random::key(1));
  EXPECT_EQ(all.size(), 14u);  // 7 per layer; lm_head is not adapted
  for (const auto& name : all) EXPECT_NE(name, "lm_head");

  LlamaForCausalLM e(tiny(4, 2, false));
  EXPECT_NE(error_of([&] {
              nn::add_lora(e, {.target_modules = {"q_proj", "qkv"}}, {});
            }).find("target_modules 'qkv' matches no Linear module"),
            std::string::npos);
  EXPECT_TRUE(nn::lora_modules(e).empty());  // nothing added by the refused call
  EXPECT_NE(error_of([&] { nn::add_lora(e, {.r = 0}, {}); }).find("r = 0"), std::string::npos);
  EXPECT_NE(error_of([&] { nn::add_lora(e, {.lora_dropout = 1}, {}); }).find("lora_dropout"),
            std::string::npos);
  nn::add_lora(e, {}, random::key(2));
  EXPECT_NE(error_of([&] { nn::add_lora(e, {}, random::key(2)); }).find("has an adapter already"),
            std::string::npos);
}

// 100 AdamW steps in the compiled step: the base weights stay bitwise; the training state is
// the adapters and their moments; the loss falls.
TEST(Lora, TrainerUpdatesOnlyTheAdapters) {
  LlamaForCausalLM m(tiny(4, 2, false));
  randomize(m, 9);
  nn::add_lora(m, {.r = 4, .lora_alpha = 8, .target_modules = {"all-linear"}}, random::key(3));
  std::map<std::string, Array> base;
  for (auto& p : m.named_parameters())
    if (!p.param->requires_grad) base[p.name] = p.param->value;
  const Array ids = tokens(4, kSeq, 61, 11);
  train::Trainer t(
      m,
      [](nn::Module& mod, const train::Inputs& d) {
        auto& lm = static_cast<LlamaForCausalLM&>(mod);
        return std::vector<trace::Tensor>{nn::next_token_loss(lm.forward(d["ids"]), d["ids"])};
      },
      {{"ids", {DType::s32, ids.shape()}, true}}, optim::AdamW{.lr = 1e-2});
  t.set_resident("ids", ids);
  t.step({});
  const double first = t.read_last().loss;
  for (int s = 1; s < 100; ++s) t.step({});
  EXPECT_LT(t.read_last().loss, 0.8 * first);
  for (auto& [name, a] : t.frozen_parameters())
    EXPECT_EQ(std::memcmp(a.raw(), base.at(name).raw(), a.nbytes()), 0) << name;
  EXPECT_EQ(t.frozen_parameters().size(), base.size());
  for (auto& [name, a] : t.named_parameters())
    EXPECT_NE(name.find(".lora_"), std::string::npos) << name;
  for (auto& [name, type] : t.state_specs())
    EXPECT_TRUE(name == "optimizer.step" || name.find(".lora_") != std::string::npos) << name;
}

}  // namespace

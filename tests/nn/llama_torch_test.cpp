// LlamaForCausalLM against an independent PyTorch implementation of HuggingFace's Llama
// equations (tests/nn/llama_torch.py, run once by Debian's /usr/bin/python3 on every case's
// weights, exchanged as safetensors in a scratch folder): logits of tiny random models (MHA,
// GQA, MQA; tied and untied; rope_theta 10000, and 500000 with the llama3 scaling; rotate-half,
// and interleaved RoPE on Meta-layout weights that the oracle permutes into HF's layout as
// convert_llama_weights_to_hf.py does; biases; an attention mask with left and right padding),
// the RoPE frequencies, and one training step's loss and gradients; in f32 and in f64.
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "nn/llama_util.h"
#include "tlaloc/io/safetensors.h"

using namespace tlaloc;
using namespace tlaloc::llama_test;

namespace {

struct Case {
  std::string name;
  LlamaConfig c;
  DType dtype = DType::f32;
  bool mask = false;  // an attention mask (then logits only, compared on the real rows)
};

std::vector<Case> cases() {
  auto interleaved = [](LlamaConfig c) {
    c.rope_interleaved = true;
    return c;
  };
  auto biases = [](LlamaConfig c) {
    c.attention_bias = c.mlp_bias = true;
    return c;
  };
  auto head_dim = [](LlamaConfig c, int64_t d) {
    c.head_dim = d;
    return c;
  };
  std::vector<Case> v;
  v.push_back({"mha_untied_theta1e4", tiny(4, 4, false)});
  v.push_back({"gqa_tied_llama3_headdim12", head_dim(with_llama3(tiny(4, 2, true)), 12)});
  v.push_back({"gqa_untied_llama3", with_llama3(tiny(4, 2, false))});
  // Llama 3.1's own scaling (original context 8192) at head_dim 128: its frequencies.
  LlamaConfig l31 = head_dim(with_llama3(tiny(4, 2, false)), 128);
  l31.rope_scaling->llama3.original_max_position_embeddings = 8192;
  v.push_back({"gqa_untied_llama31_headdim128", l31});
  v.push_back(
      {"mqa_untied_llama3_interleaved_bias", biases(interleaved(with_llama3(tiny(4, 1, false))))});
  v.push_back({"gqa_tied_theta1e4_interleaved", interleaved(tiny(4, 2, true))});
  v.push_back({"gqa_untied_mask", tiny(4, 2, false), DType::f32, true});
  v.push_back(
      {"f64_gqa_tied_llama3_headdim12", head_dim(with_llama3(tiny(4, 2, true)), 12), DType::f64});
  v.push_back({"f64_mqa_untied_llama3_interleaved_bias",
               biases(interleaved(with_llama3(tiny(4, 1, false)))), DType::f64});
  v.push_back({"f64_mha_untied_theta1e4", tiny(4, 4, false), DType::f64});
  return v;
}

constexpr int64_t kBatch = 2, kSeq = 12;

// Row 0 padded on the right (last 3), row 1 on the left (first 2).
Array padding_mask() {
  std::vector<int32_t> m(size_t(kBatch * kSeq), 1);
  for (int64_t s = kSeq - 3; s < kSeq; ++s) m[size_t(s)] = 0;
  m[size_t(kSeq)] = m[size_t(kSeq + 1)] = 0;
  return Array::from(Shape{kBatch, kSeq}, m);
}

struct Worst {
  double logits = 0, grads = 0;
};

TEST(LlamaTorch, LogitsAndGradientsEqualHfEquationsInPyTorch) {
  if (!have_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch and numpy is needed";
  io::testing::ScratchDir dir;
  std::vector<Case> all = cases();
  std::vector<std::unique_ptr<LlamaForCausalLM>> models;
  const Array ids = tokens(kBatch, kSeq, 61);
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& k = all[i];
    auto& m = models.emplace_back(std::make_unique<LlamaForCausalLM>(k.c));
    randomize(*m, 100 + i, k.dtype);
    std::vector<std::pair<std::string, Array>> t{{"input_ids", ids}};
    if (k.mask) t.emplace_back("attention_mask", padding_mask());
    for (auto& p : m->named_parameters()) t.emplace_back(p.name, p.param->value);
    LlamaConfig hf = k.c;
    hf.rope_interleaved = false;  // the weights say it (metadata "interleaved")
    io::save_safetensors(dir.file(k.name + ".in.safetensors"), t,
                         {{"config", nn::models::to_json(hf).dump()},
                          {"dtype", k.dtype == DType::f64 ? "float64" : "float32"},
                          {"interleaved", k.c.rope_interleaved ? "1" : "0"},
                          {"grad", k.mask ? "0" : "1"}});
  }
  run_llama_torch(dir.path());
  if (HasFatalFailure()) return;

  Worst f32, f64;
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& k = all[i];
    SCOPED_TRACE(k.name);
    LlamaForCausalLM& m = *models[i];
    auto out = io::SafetensorsFile::open(dir.file(k.name + ".out.safetensors"));
    const bool is64 = k.dtype == DType::f64;
    Worst& worst = is64 ? f64 : f32;
    const double tol_logits = is64 ? 1e-12 : 1e-5, tol_grads = is64 ? 1e-11 : 1e-4;

    // The RoPE frequencies (f32: HF's f32 arithmetic, up to pow's last ulp).
    Array inv = nn::rope_inv_freq(k.c.head_size(), k.c.rope_theta, k.c.llama3_scaling(), k.dtype);
    EXPECT_LE(rel_err(inv, io::to_array(out.at("inv_freq"))), is64 ? 1e-15 : 3e-7);

    std::optional<Array> mask;
    std::vector<bool> keep;  // the logits of real (unpadded) query rows
    if (k.mask) {
      mask = padding_mask();
      for (int64_t r = 0; r < kBatch * kSeq; ++r)
        for (int64_t v = 0; v < k.c.vocab_size; ++v) keep.push_back(mask->data<int32_t>()[r] != 0);
    }
    Array got = logits(m, ids, mask);
    double e = rel_err(got, io::to_array(out.at("logits")), k.mask ? &keep : nullptr);
    std::printf("  %-40s logits rel err %.3g\n", k.name.c_str(), e);
    EXPECT_LE(e, tol_logits);
    worst.logits = std::max(worst.logits, e);
    if (k.mask) continue;

    std::vector<Array> lg = loss_and_grads(m, ids);
    EXPECT_LE(rel_err(lg[0], io::to_array(out.at("loss"))), tol_logits);
    double eg = 0;
    auto params = m.named_parameters();
    for (size_t p = 0; p < params.size(); ++p) {
      double ep = rel_err(lg[1 + p], io::to_array(out.at("grad." + params[p].name)));
      EXPECT_LE(ep, tol_grads) << params[p].name;
      eg = std::max(eg, ep);
    }
    std::printf("  %-40s loss %.6f, gradients max rel err %.3g\n", k.name.c_str(), lg[0].at(0), eg);
    worst.grads = std::max(worst.grads, eg);
  }
  std::printf("worst: f32 logits %.3g, gradients %.3g; f64 logits %.3g, gradients %.3g\n",
              f32.logits, f32.grads, f64.logits, f64.grads);
}

}  // namespace

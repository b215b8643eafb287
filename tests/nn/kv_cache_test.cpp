// KV-cache decoding (nn/kv_cache.h) against the full forward recomputed on the whole prefix
// with plain-op attention (tests/support/lm_oracle.h): every position, MHA / GQA / MQA, tied
// and untied heads, two sequences in one batch; the caches are donated (updated in place); the
// step survives StableHLO emit -> parse -> run.
#include <gtest/gtest.h>

#include <cmath>

#include "support/lm_oracle.h"
#include "support/stablehlo_roundtrip.h"
#include "tlaloc/nn/kv_cache.h"
#include "tlaloc/runtime/host/compile.h"

using namespace tlaloc;

namespace {

nn::CausalLMConfig small(int64_t heads, int64_t kv_heads, bool tied = false) {
  return {.vocab = 256,
          .context = 8,
          .d_model = 16,
          .layers = 2,
          .heads = heads,
          .kv_heads = kv_heads,
          .d_ff = 32,
          .tied = tied};
}

// The same sizes with RMSNorm and the erf form of GELU.
nn::CausalLMConfig rms_erf(nn::CausalLMConfig c) {
  c.norm = "rmsnorm";
  c.gelu = "none";
  return c;
}

// Runs the decode step over `seqs` (batch rows, equal lengths <= context); returns the logits
// of every position: [position][row][vocab].
std::vector<std::vector<std::vector<float>>> decode_all(
    nn::CausalLM& m, const std::vector<std::vector<int32_t>>& seqs) {
  const int64_t B = int64_t(seqs.size()), L = m.config().layers, V = m.config().vocab;
  auto exe = runtime::host::compile(nn::decode_step(m, B), {.num_threads = 1});
  std::vector<Array> in{Array(DType::s32, Shape{B}), Array(DType::s32, Shape{})};
  const ir::TensorType ct = m.kv_cache_type(B);
  // Stale garbage in every slot: the mask, not zero-filled slots, must hide later positions.
  for (int64_t i = 0; i < 2 * L; ++i) in.push_back(Array::filled(ct.dtype, ct.shape, 7.5));
  for (auto& p : m.named_parameters()) in.push_back(p.param->value);
  std::vector<std::vector<std::vector<float>>> out;
  for (size_t pos = 0; pos < seqs[0].size(); ++pos) {
    for (int64_t b = 0; b < B; ++b) in[0].data<int32_t>()[b] = seqs[size_t(b)][pos];
    in[1].data<int32_t>()[0] = int32_t(pos);
    const void* cache0 = in[2].raw();
    auto res = exe->run_donated(in);
    EXPECT_TRUE(in[2].empty());       // donated
    EXPECT_EQ(res[1].raw(), cache0);  // and updated in its own storage
    for (int64_t i = 0; i < 2 * L; ++i) in[size_t(2 + i)] = std::move(res[size_t(1 + i)]);
    auto& rows = out.emplace_back();
    for (int64_t b = 0; b < B; ++b) {
      const float* l = res[0].data<float>() + b * V;
      rows.emplace_back(l, l + V);
    }
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - want[i]));
  EXPECT_LT(worst, tol);
}

TEST(KVCache, DecodeEqualsRecomputingTheWholePrefixAtEveryPosition) {
  struct Case {
    const char* name;
    nn::CausalLMConfig c;
  };
  for (const Case& k :
       {Case{"MHA", small(4, 4)}, Case{"GQA", small(4, 2)}, Case{"MQA", small(4, 1)},
        Case{"GQA tied", small(4, 2, true)}, Case{"GQA rmsnorm erf-GELU", rms_erf(small(4, 2))}}) {
    SCOPED_TRACE(k.name);
    nn::CausalLM m(k.c);
    m.init(random::key(11));
    std::vector<std::vector<int32_t>> seqs{{84, 104, 101, 32, 99, 97, 116, 46},
                                           {0, 255, 7, 7, 7, 128, 10, 65}};
    auto got = decode_all(m, seqs);
    tlaloc::testing::RecomputeOracle oracle(m);
    for (size_t b = 0; b < seqs.size(); ++b)
      for (size_t pos = 0; pos < seqs[b].size(); ++pos) {
        SCOPED_TRACE(fmt::format("row {} position {}", b, pos));
        std::span<const int32_t> prefix(seqs[b].data(), pos + 1);
        expect_close(got[pos][b], oracle.last_logits(prefix), 1e-5);
      }
  }
}

TEST(KVCache, DecodeStepSignatureAndAliases) {
  nn::CausalLM m(small(4, 2));
  ir::Function f = nn::decode_step(m, 3);
  EXPECT_EQ(f.input_names[0], "token");
  EXPECT_EQ(f.input_names[1], "pos");
  EXPECT_EQ(f.input_names[2], "k.0");
  EXPECT_EQ(f.input_names[5], "v.1");
  EXPECT_EQ(f.input_names[6], "tok_emb.weight");
  EXPECT_EQ(f.output_type(0).shape, (Shape{3, 256}));
  EXPECT_EQ(f.input_type(2).shape, (Shape{3, 2, 8, 4}));  // [batch, kv_heads, context, head_dim]
  ASSERT_EQ(f.aliases.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f.aliases[size_t(i)], (ir::Alias{1 + i, 2 + i}));
  EXPECT_THROW(nn::decode_step(m, 0), Error);
}

TEST(KVCache, DecodeStepSurvivesStableHloEmitParseRun) {
  // The pjrt lane's form of the step: emitted, parsed back, run bitwise equal, aliases kept.
  nn::CausalLM m(small(4, 2));
  m.init(random::key(2));
  ir::Function f = nn::decode_step(m, 2);
  std::vector<Array> in = tlaloc::testing::sample_inputs(f, 3);
  in[1] = Array::scalar<int32_t>(5);
  std::string text = tlaloc::testing::expect_stablehlo_roundtrip(f, in);
  EXPECT_NE(text.find("stablehlo.dynamic_update_slice"), std::string::npos);
}

}  // namespace

#include "support/stablehlo_roundtrip.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "tlaloc/composites/composites.h"
#include "tlaloc/passes/expand.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/stablehlo/emit.h"
#include "tlaloc/stablehlo/parse.h"

namespace tlaloc::testing {

Runner default_runner() {
  return [](const ir::Function& f, std::span<const Array> in) {
    return runtime::host::compile(f)->run(in);
  };
}

std::string expect_stablehlo_roundtrip(const ir::Function& f, std::span<const Array> inputs,
                                       const Runner& run) {
  std::string text = stablehlo::emit(f);
  if (const char* dir = std::getenv("TLALOC_STABLEHLO_DUMP_DIR")) {
    static std::atomic<int> counter{0};
    std::ofstream(fmt::format("{}/{:04d}_{}.mlir", dir, counter++, f.name)) << text;
  }
  ir::Function g;
  try {
    g = stablehlo::parse(text);
  } catch (const Error& e) {
    ADD_FAILURE() << "parse failed: " << e.what() << "\n" << text;
    return text;
  }
  EXPECT_EQ(g.num_inputs(), f.num_inputs());
  EXPECT_EQ(g.num_outputs(), f.num_outputs());
  if (g.num_inputs() != f.num_inputs() || g.num_outputs() != f.num_outputs()) return text;
  for (int i = 0; i < f.num_inputs(); ++i) EXPECT_EQ(g.input_type(i), f.input_type(i)) << i;
  for (int i = 0; i < f.num_outputs(); ++i) EXPECT_EQ(g.output_type(i), f.output_type(i)) << i;
  EXPECT_EQ(g.aliases, f.aliases);
  EXPECT_EQ(g.input_names, f.input_names);
  EXPECT_EQ(g.output_names, f.output_names);
  EXPECT_EQ(stablehlo::emit(g), text) << "emit(parse(emit(f))) differs from emit(f)";
  // Composites are emitted as their decomposition: compare with that (a fused kernel need not
  // be bitwise equal to it).
  std::vector<Array> want = run(passes::expand_composites(f), inputs), got = run(g, inputs);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size() && i < got.size(); ++i)
    EXPECT_TRUE(got[i].bitwise_equal(want[i]))
        << "output " << i << " differs: " << describe(got[i]) << " vs " << describe(want[i]) << "\n"
        << text;
  return text;
}

std::vector<Array> sample_inputs(const ir::Function& f, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {  // splitmix64
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  std::vector<Array> out;
  for (int i = 0; i < f.num_inputs(); ++i) {
    const ir::TensorType& t = f.input_type(i);
    std::vector<double> v(size_t(t.shape.numel()));
    for (size_t k = 0; k < v.size(); ++k) {
      if (is_floating(t.dtype))
        v[k] = -2.0 + 4.0 * double(next() >> 11) / double(1ull << 53);
      else if (t.dtype == DType::i1)
        v[k] = double(k % 2);
      else
        v[k] = double(next() % 8);
    }
    out.push_back(Array::from_doubles(t.dtype, t.shape, v));
  }
  return out;
}

}  // namespace tlaloc::testing

#include "kernel_test_util.h"

#include <fmt/format.h>

#include <string>

#include "tlaloc/runtime/host/plan.h"

namespace tlaloc::host_test {

std::set<ir::Op>& tested_ops() {
  static std::set<ir::Op> s;
  return s;
}

std::vector<Array> run_all(const ir::Function& f, const std::vector<Array>& inputs) {
  std::vector<Array> first;
  for (bool fuse : {true, false}) {
    for (int threads : {1, 2}) {
      auto exe = runtime::host::compile(f, {.num_threads = threads, .fuse = fuse});
      auto out = exe->run(inputs);
      auto again = exe->run(inputs);
      EXPECT_EQ(out.size(), size_t(f.num_outputs()));
      for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_TRUE(out[i].bitwise_equal(again[i])) << "run-to-run differs, output " << i;
        if (!first.empty()) {
          EXPECT_TRUE(out[i].bitwise_equal(first[i]))
              << "output " << i << " differs with fuse=" << fuse << " threads=" << threads;
        }
      }
      if (first.empty()) first = std::move(out);
    }
  }
  return first;
}

void expect_values(const Array& a, const std::vector<double>& want, double tol) {
  ASSERT_EQ(a.numel(), int64_t(want.size())) << describe(a);
  for (size_t i = 0; i < want.size(); ++i) {
    double got = a.at(int64_t(i)), w = want[i];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(got)) << "element " << i << ": got " << got << ", want NaN";
    } else if (tol == 0 || std::isinf(w)) {  // an infinity must match exactly
      EXPECT_EQ(got, w) << "element " << i;
      if (got == 0 && w == 0) {
        EXPECT_EQ(std::signbit(got), std::signbit(w)) << "element " << i << ": sign of zero";
      }
    } else {
      EXPECT_NEAR(got, w, tol * std::max(1.0, std::fabs(w))) << "element " << i;
    }
  }
}

ir::Function one_op(
    const std::vector<ir::TensorType>& params,
    const std::function<ir::ValueId(ir::Builder&, std::vector<ir::ValueId>&)>& make) {
  return one_op_results(params, [&](ir::Builder& b, std::vector<ir::ValueId>& p) {
    return std::vector<ir::ValueId>{make(b, p)};
  });
}

ir::Function one_op_results(
    const std::vector<ir::TensorType>& params,
    const std::function<std::vector<ir::ValueId>(ir::Builder&, std::vector<ir::ValueId>&)>& make) {
  ir::Builder b("one_op");
  std::vector<ir::ValueId> p;
  for (size_t i = 0; i < params.size(); ++i)
    p.push_back(b.parameter(params[i], fmt::format("x{}", i)));
  return b.build(make(b, p));
}

std::vector<double> flat(const std::vector<Array>& xs) {
  std::vector<double> out;
  for (const Array& x : xs)
    for (double v : x.to_doubles()) out.push_back(v);
  return out;
}

double round_to(DType t, double v) { return Array::from_doubles(t, Shape{}, {v}).at(0); }

std::vector<double> lcg_doubles(int64_t n, uint64_t seed, double lo, double hi) {
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& e : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    e = lo + (hi - lo) * double(x >> 11) * 0x1.0p-53;
  }
  return v;
}

Array lcg_array(DType dt, Shape s, uint64_t seed, double lo, double hi) {
  return Array::from_doubles(dt, s, lcg_doubles(s.numel(), seed, lo, hi));
}

}  // namespace tlaloc::host_test

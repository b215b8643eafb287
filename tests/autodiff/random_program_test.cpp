// Random compositions of smooth ops (fan-out, reuse, relayouts, contractions) checked against
// f64 finite differences, first and second order: catches rules that are right alone but
// wrong together (accumulation, dimension orders).
#include "harness.h"

using namespace tlaloc;
using namespace tlaloc::testing;
using trace::Tensor;

namespace {

struct Rng {
  uint64_t s;
  int below(int n) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return int((s >> 33) % uint64_t(n));
  }
};

// A [3, 3] -> [3, 3] step built from pool values; keeps values bounded (tanh / logistic).
Tensor step(Rng& r, const std::vector<Tensor>& pool) {
  const Tensor& a = pool[size_t(r.below(int(pool.size())))];
  const Tensor& b = pool[size_t(r.below(int(pool.size())))];
  switch (r.below(10)) {
    case 0:
      return trace::tanh(a * b);
    case 1:
      return trace::sigmoid(a - b) + a;
    case 2:
      return trace::matmul(a, b) * 0.3;
    case 3:
      return trace::transpose(a) / (trace::exp(b) + 1.0);
    case 4:
      return trace::broadcast_to(trace::sum(a, {0}, true), {3, 3}) * b * 0.2;
    case 5:
      return trace::concat({trace::slice(a, 1, 0, 2), trace::slice(b, 1, 2, 3)}, 1);
    case 6:
      return trace::reshape(trace::transpose(trace::reshape(a, {9, 1})), {3, 3}) + b;
    case 7:
      return trace::softmax(a + b, 0);
    case 8:
      return trace::sqrt(a * a + 1.0) - trace::log1p(b * b);
    default:
      return trace::maximum(a, b + 0.05) * trace::minimum(a, b - 0.05);
  }
}

}  // namespace

TEST(RandomPrograms, FirstAndSecondOrderMatchFiniteDifferences) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ir::TensorType t{DType::f64, {3, 3}};
    ir::Function f = trace::capture(
        [seed](std::span<const Tensor> in) {
          Rng r{seed};
          std::vector<Tensor> pool(in.begin(), in.end());
          for (int i = 0; i < 8; ++i) pool.push_back(step(r, pool));
          return std::vector<Tensor>{trace::sum(pool.back() * pool[pool.size() - 3]), pool.back()};
        },
        {t, t});
    std::vector<Array> x{uniform({3, 3}, seed * 2), uniform({3, 3}, seed * 2 + 1)};
    expect_vjp_matches_fd(f, x, {0, 1});
    ir::Function g = autodiff::grad(f, {0, 1});
    expect_vjp_matches_fd(g, x, {0, 1}, 1e-6, 1e-5);
  }
}

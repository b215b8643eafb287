// Helpers for the autodiff tests: deterministic inputs, running a function, and a central
// finite-difference oracle in f64.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/passes/evaluate.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

namespace tlaloc::testing {

// Runs f on the host lane (compiled once per call; use compile_host to run many times).
inline std::unique_ptr<runtime::Executable> compile_host(const ir::Function& f) {
  return runtime::host::compile(f);
}
inline std::vector<Array> execute(const ir::Function& f, const std::vector<Array>& inputs) {
  return compile_host(f)->run(inputs);
}

// Deterministic values in [lo, hi) (a 64-bit LCG), as f64.
inline Array uniform(Shape shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  std::vector<double> v(size_t(shape.numel()));
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + (hi - lo) * double(s >> 11) * 0x1.0p-53;
  }
  return Array::from_doubles(DType::f64, std::move(shape), v);
}

inline Array f64(Shape shape, std::vector<double> v) {
  return Array::from_doubles(DType::f64, std::move(shape), v);
}

inline double dot(const Array& a, const Array& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.at(i) * b.at(i);
  return s;
}

// Checks vjp(f, wrt) at `x` against central differences of L(x) = sum_k <ct_k, f(x)_k> with
// step h: |analytic - fd| <= tol * max(1, |fd|) for every element of every wrt input. Both run
// on the host lane; the gradient is also cross-checked against the reference interpreter.
inline void expect_vjp_matches_fd(const ir::Function& f, const std::vector<Array>& x,
                                  std::vector<int> wrt, double h = 1e-6, double tol = 1e-6,
                                  uint64_t seed = 99) {
  ir::Function g = autodiff::vjp(f, wrt);
  std::vector<Array> cts;
  for (int k = 0; k < f.num_outputs(); ++k) {
    const ir::TensorType& t = f.output_type(k);
    cts.push_back(is_floating(t.dtype)
                      ? uniform(t.shape, seed + uint64_t(k), 0.5, 1.5).astype(t.dtype)
                      : Array(t.dtype, t.shape));
  }
  std::vector<Array> gin = x;
  gin.insert(gin.end(), cts.begin(), cts.end());
  std::vector<Array> grads = execute(g, gin);
  ASSERT_EQ(grads.size(), wrt.size());
  std::vector<Array> ref = passes::interpret(g, gin);
  for (size_t j = 0; j < grads.size(); ++j)
    for (int64_t e = 0; e < grads[j].numel(); ++e)
      EXPECT_NEAR(grads[j].at(e), ref[j].at(e), 1e-12 * std::max(1.0, std::fabs(ref[j].at(e))))
          << f.name << ": host lane vs interpreter, output " << j << " element " << e;
  auto fexe = compile_host(f);
  auto loss = [&](const std::vector<Array>& in) {
    std::vector<Array> out = fexe->run(in);
    double s = 0;
    for (size_t k = 0; k < out.size(); ++k)
      if (is_floating(out[k].dtype())) s += dot(cts[k], out[k]);
    return s;
  };
  for (size_t j = 0; j < wrt.size(); ++j) {
    const Array& xi = x[size_t(wrt[j])];
    ASSERT_EQ(grads[j].shape(), xi.shape()) << "wrt " << wrt[j];
    if (!is_floating(xi.dtype())) continue;
    for (int64_t e = 0; e < xi.numel(); ++e) {
      std::vector<double> v = xi.to_doubles();
      std::vector<Array> plus = x, minus = x;
      v[size_t(e)] += h;
      plus[size_t(wrt[j])] = Array::from_doubles(xi.dtype(), xi.shape(), v);
      v[size_t(e)] -= 2 * h;
      minus[size_t(wrt[j])] = Array::from_doubles(xi.dtype(), xi.shape(), v);
      double fd = (loss(plus) - loss(minus)) / (2 * h);
      double an = grads[j].at(e);
      EXPECT_NEAR(an, fd, tol * std::max(1.0, std::fabs(fd)))
          << f.name << ": d/d input " << wrt[j] << " element " << e;
    }
  }
}

}  // namespace tlaloc::testing

// Moments over 10^6 draws against closed forms (tolerances: 5 standard errors), split
// independence, and exact properties (ranges, permutations) of every distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "tlaloc/random/random.h"

using namespace tlaloc;
using namespace tlaloc::random;

namespace {

constexpr int64_t kN = 1000000;
const Mode kModes[] = {Mode::partitionable, Mode::legacy};

struct Moments {
  double mean = 0, var = 0, skew = 0, kurt = 0;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  const double n = double(v.size());
  for (double x : v) m.mean += x;
  m.mean /= n;
  double m2 = 0, m3 = 0, m4 = 0;
  for (double x : v) {
    const double d = x - m.mean;
    m2 += d * d, m3 += d * d * d, m4 += d * d * d * d;
  }
  m2 /= n, m3 /= n, m4 /= n;
  m.var = m2;
  m.skew = m3 / std::pow(m2, 1.5);
  m.kurt = m4 / (m2 * m2);
  return m;
}

double phi(double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); }
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

TEST(Distributions, UniformMoments) {
  for (Mode m : kModes) {
    auto v = uniform(key(11), {kN}, DType::f32, 0, 1, m).to_doubles();
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    EXPECT_GE(*lo, 0.0);
    EXPECT_LT(*hi, 1.0);
    Moments s = moments(v);
    EXPECT_NEAR(s.mean, 0.5, 5 * std::sqrt(1.0 / 12 / kN));
    EXPECT_NEAR(s.var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / kN));
    // A shifted, scaled range in f64 (64-bit draws).
    auto w = uniform(key(12), {kN}, DType::f64, -3, 5, m).to_doubles();
    Moments t = moments(w);
    EXPECT_NEAR(t.mean, 1.0, 5 * 8 / std::sqrt(12.0 * kN));
    EXPECT_NEAR(t.var, 64.0 / 12, 5 * 64 * std::sqrt((1.0 / 80 - 1.0 / 144) / kN));
    EXPECT_GE(*std::min_element(w.begin(), w.end()), -3.0);
    EXPECT_LT(*std::max_element(w.begin(), w.end()), 5.0);
  }
}

TEST(Distributions, UniformHalfPrecisionRanges) {
  for (DType t : {DType::bf16, DType::f16}) {
    auto v = uniform(key(13), {100000}, t, 0, 1).to_doubles();
    Moments s = moments(v);
    EXPECT_NEAR(s.mean, 0.5, 0.01) << name(t);
    EXPECT_GE(*std::min_element(v.begin(), v.end()), 0.0);
    EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.0);
  }
  EXPECT_THROW(uniform(key(0), {2}, DType::s32), Error);
}

TEST(Distributions, NormalMoments) {
  for (Mode m : kModes) {
    for (DType t : {DType::f32, DType::f64}) {
      Moments s = moments(normal(key(21), {kN}, t, m).to_doubles());
      EXPECT_NEAR(s.mean, 0.0, 5 / std::sqrt(double(kN)));
      EXPECT_NEAR(s.var, 1.0, 5 * std::sqrt(2.0 / kN));
      EXPECT_NEAR(s.skew, 0.0, 5 * std::sqrt(6.0 / kN));
      EXPECT_NEAR(s.kurt, 3.0, 5 * std::sqrt(24.0 / kN));
    }
  }
}

// Truncated to (a, b): mean = (phi(a) - phi(b)) / Z, variance = 1 + (a phi(a) - b phi(b)) / Z -
// mean^2 with Z = Phi(b) - Phi(a).
TEST(Distributions, TruncatedNormalMoments) {
  const double bounds[][2] = {{-2, 2}, {0.5, 3}};
  for (Mode m : kModes) {
    for (auto& ab : bounds) {
      const double a = ab[0], b = ab[1], z = Phi(b) - Phi(a);
      const double mean = (phi(a) - phi(b)) / z;
      const double var = 1 + (a * phi(a) - b * phi(b)) / z - mean * mean;
      auto v = truncated_normal(key(31), a, b, {kN}, DType::f32, m).to_doubles();
      EXPECT_GT(*std::min_element(v.begin(), v.end()), a);
      EXPECT_LT(*std::max_element(v.begin(), v.end()), b);
      Moments s = moments(v);
      EXPECT_NEAR(s.mean, mean, 5 * std::sqrt(var / kN)) << a << " " << b;
      EXPECT_NEAR(s.var, var, 5 * var * std::sqrt(2.0 / kN)) << a << " " << b;
    }
  }
  // The constant in JAX's variance_scaling: the standard deviation of N(0,1) truncated to (-2,2).
  const double z = Phi(2) - Phi(-2);
  EXPECT_NEAR(std::sqrt(1 - 4 * phi(2) / z), .87962566103423978, 1e-12);
}

TEST(Distributions, BernoulliRandintCategorical) {
  for (Mode m : kModes) {
    Array b = bernoulli(key(41), 0.3, {kN}, m);
    EXPECT_EQ(b.dtype(), DType::i1);
    Moments s = moments(b.to_doubles());
    EXPECT_NEAR(s.mean, 0.3, 5 * std::sqrt(0.21 / kN));

    auto r = randint(key(42), {kN}, -3, 7, DType::s32, m).to_vector<int32_t>();
    std::vector<int64_t> count(10);
    for (int32_t x : r) {
      ASSERT_GE(x, -3);
      ASSERT_LT(x, 7);
      ++count[size_t(x + 3)];
    }
    for (int64_t c : count) EXPECT_NEAR(double(c) / kN, 0.1, 5 * std::sqrt(0.09 / kN));

    Array logits = Array::from<float>(
        {2, 3}, {std::log(0.2f), std::log(0.3f), std::log(0.5f), 0.0f, 0.0f, -INFINITY});
    std::vector<int64_t> c0(3), c1(3);
    for (int i = 0; i < 20000; ++i) {
      auto c = categorical(fold_in(key(43), uint32_t(i)), logits, m).to_vector<int32_t>();
      ++c0[size_t(c[0])];
      ++c1[size_t(c[1])];
    }
    const double p[3] = {0.2, 0.3, 0.5};
    for (int j = 0; j < 3; ++j)
      EXPECT_NEAR(double(c0[size_t(j)]) / 20000, p[j], 5 * std::sqrt(p[j] * (1 - p[j]) / 20000));
    EXPECT_EQ(c1[2], 0);  // probability 0
    EXPECT_NEAR(double(c1[0]) / 20000, 0.5, 5 * std::sqrt(0.25 / 20000));
  }
}

TEST(Distributions, RandintEdgeCases) {
  // maxval <= minval gives minval (jax-ml/jax#222).
  for (int32_t x : randint(key(1), {100}, 5, 5).to_vector<int32_t>()) EXPECT_EQ(x, 5);
  for (int32_t x : randint(key(1), {100}, 5, -5).to_vector<int32_t>()) EXPECT_EQ(x, 5);
  // The whole s32 range, and u32 up to 2^32 (maxval beyond the dtype's max).
  auto full = randint(key(2), {1000}, INT64_MIN, INT64_MAX).to_vector<int32_t>();
  EXPECT_GT(*std::max_element(full.begin(), full.end()), 1 << 30);
  EXPECT_LT(*std::min_element(full.begin(), full.end()), -(1 << 30));
  auto u = randint(key(3), {1000}, 0, int64_t(1) << 32, DType::u32).to_vector<uint32_t>();
  EXPECT_GT(*std::max_element(u.begin(), u.end()), 3u << 30);
  EXPECT_THROW(randint(key(0), {2}, 0, 3, DType::f32), Error);
}

TEST(Distributions, PermutationIsAShuffle) {
  for (Mode m : kModes) {
    auto p = permutation_indices(key(51), 60000, m);
    std::vector<int32_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (int32_t i = 0; i < 60000; ++i) ASSERT_EQ(sorted[size_t(i)], i);
    int fixed = 0;
    for (int32_t i = 0; i < 60000; ++i) fixed += p[size_t(i)] == i;
    EXPECT_LT(fixed, 10);  // about 1 expected
    EXPECT_EQ(permutation(key(51), 60000, m).to_vector<int32_t>(), p);
    // Each of the 6 orders of 3 items about equally often.
    std::map<std::vector<int32_t>, int> seen;
    for (uint32_t i = 0; i < 6000; ++i) ++seen[permutation_indices(fold_in(key(52), i), 3, m)];
    EXPECT_EQ(seen.size(), 6u);
    for (auto& [perm, c] : seen) EXPECT_NEAR(c / 6000.0, 1 / 6.0, 5 * std::sqrt(5.0 / 36 / 6000));
  }
  EXPECT_NE(permutation_indices(key(51), 100, Mode::legacy),
            permutation_indices(key(51), 100, Mode::partitionable));
  EXPECT_EQ(permutation_indices(key(1), 1), std::vector<int32_t>{0});
  EXPECT_TRUE(permutation_indices(key(1), 0).empty());
  EXPECT_THROW(permutation_indices(key(1), -1), Error);
  // Rows of an array follow permutation(n).
  Array x = Array::from<float>({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31});
  auto idx = permutation_indices(key(5), 4);
  auto y = permutation(key(5), x).to_vector<float>();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(y[2 * i], 10.0f * float(idx[i]));
    EXPECT_EQ(y[2 * i + 1], 10.0f * float(idx[i]) + 1);
  }
  EXPECT_THROW(permutation(key(5), Array::scalar(1.0f)), Error);
}

// 10^4 keys from one split, and 10^4 keys from repeated splitting: all distinct, their streams
// all distinct (first two words), and neighbouring streams uncorrelated.
TEST(Distributions, SplitKeysAreIndependent) {
  for (Mode m : kModes) {
    std::vector<Key> keys = split(key(61), 10000, m);
    Key k = key(62);
    for (int i = 0; i < 10000; ++i) {
      auto [next, sub] = split<2>(k, m);
      keys.push_back(sub);
      k = next;
    }
    std::set<std::pair<uint32_t, uint32_t>> distinct_keys;
    std::set<uint64_t> distinct_streams;
    std::vector<double> first, second;
    for (const Key& kk : keys) {
      distinct_keys.insert({kk.hi, kk.lo});
      auto b = bits(kk, {2}, m).to_vector<uint32_t>();
      distinct_streams.insert((uint64_t(b[0]) << 32) | b[1]);
      first.push_back(double(b[0]) / 4294967296.0);
      second.push_back(double(b[1]) / 4294967296.0);
    }
    EXPECT_EQ(distinct_keys.size(), keys.size());
    EXPECT_EQ(distinct_streams.size(), keys.size());
    double cov = 0, n = double(keys.size()) - 1;
    for (size_t i = 0; i + 1 < keys.size(); ++i) cov += (first[i] - 0.5) * (first[i + 1] - 0.5);
    EXPECT_NEAR(cov / n * 12, 0.0, 5 / std::sqrt(n));  // correlation of neighbouring keys
    Moments s = moments(second);
    EXPECT_NEAR(s.mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  }
}

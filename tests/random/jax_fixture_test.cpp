// Every value of tests/fixtures/jax_random.json (a copy of shared/fixtures/jax_random.json,
// values printed by JAX) in the mode it was recorded in.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tlaloc/random/random.h"

using namespace tlaloc;
using namespace tlaloc::random;
using nlohmann::json;

namespace {

json fixture() {
  std::ifstream f(TLALOC_SOURCE_DIR "/tests/fixtures/jax_random.json");
  EXPECT_TRUE(f.good()) << "missing tests/fixtures/jax_random.json";
  return json::parse(f);
}

Key as_key(const json& v) { return {v[0].get<uint32_t>(), v[1].get<uint32_t>()}; }

void expect_keys(const std::vector<Key>& got, const json& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], as_key(want[i])) << "key " << i;
}

void expect_floats(const Array& got, const std::vector<double>& want) {
  ASSERT_EQ(got.numel(), int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.at(int64_t(i)), want[i], 1e-6 * std::abs(want[i])) << "element " << i;
}

}  // namespace

TEST(JaxFixture, Partitionable) {
  const json p = fixture()["partitionable"];
  const Mode m = Mode::partitionable;
  EXPECT_EQ(fold_in(key(0), 0), as_key(p["fold_in(key(0), 0)"]));
  EXPECT_EQ(fold_in(key(0), 1), as_key(p["fold_in(key(0), 1)"]));
  expect_keys(split(key(0), 2, m), p["split(key(0), 2)"]);
  expect_floats(uniform(key(0), {3}, DType::f32, 0, 1, m),
                p["uniform(key(0), shape=(3,), float32)"].get<std::vector<double>>());
  Array u = uniform(split(key(0), 2, m)[1], {}, DType::f32, 0, 1, m);
  EXPECT_EQ(u.shape(), Shape{});
  expect_floats(u, {p["uniform(split(key(0))[1], shape=(), float32)"].get<double>()});
  EXPECT_EQ(p.size(), 5u) << "a fixture value is not covered by this test";
}

TEST(JaxFixture, Legacy) {
  const json l = fixture()["legacy"];
  const Mode m = Mode::legacy;
  expect_keys(split(key(0), 2, m), l["split(key(0), 2)"]);
  expect_keys(split(key(0), 4, m), l["split(key(0), 4)"]);
  EXPECT_EQ(fold_in(key(0), 4), as_key(l["fold_in(key(0), 4)"]));
  auto want = l["bits(key(1701), shape=(3,), uint32)"].get<std::vector<uint32_t>>();
  EXPECT_EQ(bits(key(1701), {3}, m).to_vector<uint32_t>(), want);
  EXPECT_EQ(l.size(), 4u) << "a fixture value is not covered by this test";
}

// The modes really differ (the fixture's split(key(0), 2) values differ between them).
TEST(JaxFixture, ModesGiveDifferentBits) {
  EXPECT_NE(split(key(0), 2, Mode::partitionable)[0], split(key(0), 2, Mode::legacy)[0]);
  EXPECT_FALSE(
      bits(key(1701), {3}, Mode::partitionable).bitwise_equal(bits(key(1701), {3}, Mode::legacy)));
}

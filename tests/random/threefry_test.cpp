// Threefry-2x32-20 against the Random123 known-answer vectors and the JAX fixture's copy of them.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tlaloc/random/key.h"

using namespace tlaloc;
using namespace tlaloc::random;

namespace {

nlohmann::json fixture() {
  std::ifstream f(TLALOC_SOURCE_DIR "/tests/fixtures/jax_random.json");
  EXPECT_TRUE(f.good()) << "missing tests/fixtures/jax_random.json";
  return nlohmann::json::parse(f);
}

}  // namespace

// Random123 1.14 examples/kat_vectors, lines "threefry2x32 20 <ctr0> <ctr1> <key0> <key1>
// <out0> <out1>" (hex).
TEST(Threefry, Random123KnownAnswers) {
  struct Kat {
    uint32_t ctr0, ctr1, key0, key1, out0, out1;
  };
  const Kat kats[] = {
      {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x6b200159, 0x99ba4efe},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x1cb996fc, 0xbb002be7},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xc4923a9c, 0x483df7a0},
  };
  for (const Kat& k : kats) {
    auto out = threefry2x32(Key{k.key0, k.key1}, k.ctr0, k.ctr1);
    EXPECT_EQ(out[0], k.out0);
    EXPECT_EQ(out[1], k.out1);
  }
}

TEST(Threefry, FixtureKnownAnswers) {
  auto j = fixture();
  ASSERT_EQ(j["threefry2x32_20_kat"].size(), 3u);
  for (const auto& v : j["threefry2x32_20_kat"]) {
    Key k{v["key"][0].get<uint32_t>(), v["key"][1].get<uint32_t>()};
    auto out = threefry2x32(k, v["counter"][0].get<uint32_t>(), v["counter"][1].get<uint32_t>());
    EXPECT_EQ(out[0], v["out"][0].get<uint32_t>());
    EXPECT_EQ(out[1], v["out"][1].get<uint32_t>());
  }
}

// jax.random.key / PRNGKey seeding (jax/_src/prng.py threefry_seed; jax-ml/jax#27282:
// jax.random.key(-1) and key(2**32 - 1) both have key data [0, 4294967295]).
TEST(Key, SeedsAsJax) {
  EXPECT_EQ(key(0), (Key{0, 0}));
  EXPECT_EQ(key(1701), (Key{0, 1701}));
  EXPECT_EQ(key(0x123456789abcdef0ull), (Key{0x12345678u, 0x9abcdef0u}));
  EXPECT_EQ(key(uint64_t(int64_t(-1))), (Key{0xffffffffu, 0xffffffffu}));  // x64 mode
  EXPECT_EQ(key32(-1), (Key{0u, 4294967295u}));
  EXPECT_EQ(key32(-1), key(4294967295u));
  EXPECT_EQ(key_from_data(key_data(Key{7, 9})), (Key{7, 9}));
  EXPECT_THROW(key_from_data(Array(DType::u32, {3})), Error);
  EXPECT_THROW(key_from_data(Array(DType::s32, {2})), Error);
}

TEST(Key, SplitTemplateMatchesVector) {
  for (Mode m : {Mode::partitionable, Mode::legacy}) {
    auto [a, b, c] = split<3>(key(42), m);
    auto v = split(key(42), 3, m);
    EXPECT_EQ(a, v[0]);
    EXPECT_EQ(b, v[1]);
    EXPECT_EQ(c, v[2]);
  }
  EXPECT_THROW(split(key(0), -1), Error);
  EXPECT_TRUE(split(key(0), 0).empty());
}

// Legacy split by hand: counts iota(2n) cut in halves x0 = [0, n), x1 = [n, 2n); the output is
// concat(hash0, hash1) reshaped to [n, 2].
TEST(Key, LegacySplitFollowsHalvesLayout) {
  Key k = key(5);
  auto keys = split(k, 3, Mode::legacy);
  std::vector<uint32_t> words(6);
  for (uint32_t j = 0; j < 3; ++j) {
    auto h = threefry2x32(k, j, j + 3);
    words[j] = h[0];
    words[j + 3] = h[1];
  }
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(keys[i].hi, words[2 * i]);
    EXPECT_EQ(keys[i].lo, words[2 * i + 1]);
  }
}

TEST(Key, RandomBitsRejectsBadWidth) {
  EXPECT_THROW(random_bits(key(0), 12, 4), Error);
  EXPECT_THROW(random_bits(key(0), 32, -1), Error);
}

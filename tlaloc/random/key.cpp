#include "tlaloc/random/key.h"

namespace tlaloc::random {
namespace {

template <int R>
inline void mix(uint32_t& x0, uint32_t& x1) {
  x0 += x1;
  x1 = (x1 << R) | (x1 >> (32 - R));
  x1 ^= x0;
}

// Four rounds with rotations R0..R3, then the key injection (a, b + i).
template <int R0, int R1, int R2, int R3>
inline void group(uint32_t& x0, uint32_t& x1, uint32_t a, uint32_t b, uint32_t i) {
  mix<R0>(x0, x1);
  mix<R1>(x0, x1);
  mix<R2>(x0, x1);
  mix<R3>(x0, x1);
  x0 += a;
  x1 += b + i;
}

// Threefry-2x32-20 (Salmon et al. 2011): 5 groups of 4 rounds with a key injection after each,
// fully unrolled so that loops over counters vectorise.
inline void hash(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  const uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu;
  x0 += k0;
  x1 += k1;
  group<13, 15, 26, 6>(x0, x1, k1, k2, 1);
  group<17, 29, 16, 24>(x0, x1, k2, k0, 2);
  group<13, 15, 26, 6>(x0, x1, k0, k1, 3);
  group<17, 29, 16, 24>(x0, x1, k1, k2, 4);
  group<13, 15, 26, 6>(x0, x1, k2, k0, 5);
}

// Legacy threefry_2x32(key, iota(m)): the counts are padded to even length m', cut into halves
// c[0, h) and c[h, m') with h = m' / 2, hashed pairwise; output = concat(y0, y1)[0, m).
void legacy_words(Key k, uint64_t m, uint32_t* out) {
  if (m > 0xFFFFFFFEull)
    fail("random: legacy mode draws at most 4294967294 32-bit words at once, asked for {}", m);
  const uint64_t h = (m + 1) / 2;
  for (uint64_t j = 0; j < h; ++j) {
    uint32_t x0 = uint32_t(j), x1 = j + h < m ? uint32_t(j + h) : 0u;  // 0: the padding count
    hash(k.hi, k.lo, x0, x1);
    out[j] = x0;
    if (j + h < m) out[j + h] = x1;
  }
}

}  // namespace

Key key(uint64_t seed) { return {uint32_t(seed >> 32), uint32_t(seed & 0xFFFFFFFFu)}; }

Key key32(int32_t seed) { return {0u, uint32_t(seed)}; }

Array key_data(Key k) { return Array::from<uint32_t>({2}, {k.hi, k.lo}); }

Key key_from_data(const Array& data) {
  if (data.dtype() != DType::u32 || data.numel() != 2)
    fail("random::key_from_data: expected u32[2] key data, got {}", describe(data));
  auto s = data.span<uint32_t>();
  return {s[0], s[1]};
}

std::array<uint32_t, 2> threefry2x32(Key k, uint32_t x0, uint32_t x1) {
  hash(k.hi, k.lo, x0, x1);
  return {x0, x1};
}

std::vector<Key> split(Key k, int64_t n, Mode mode) {
  if (n < 0) fail("random::split: number of keys must be >= 0, got {}", n);
  std::vector<Key> out(static_cast<size_t>(n));
  if (mode == Mode::partitionable) {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t x0 = uint32_t(uint64_t(i) >> 32), x1 = uint32_t(i);
      hash(k.hi, k.lo, x0, x1);
      out[size_t(i)] = {x0, x1};
    }
  } else {
    std::vector<uint32_t> w(size_t(2 * n));
    legacy_words(k, uint64_t(2 * n), w.data());
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = {w[size_t(2 * i)], w[size_t(2 * i + 1)]};
  }
  return out;
}

Key fold_in(Key k, uint32_t data) {
  auto h = threefry2x32(k, 0u, data);
  return {h[0], h[1]};
}

void random_bits32(Key k, int64_t n, uint32_t* out, Mode mode) {
  if (n < 0) fail("random::random_bits: count must be >= 0, got {}", n);
  if (mode == Mode::partitionable) {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t x0 = uint32_t(uint64_t(i) >> 32), x1 = uint32_t(i);
      hash(k.hi, k.lo, x0, x1);
      out[i] = x0 ^ x1;
    }
  } else {
    legacy_words(k, uint64_t(n), out);
  }
}

std::vector<uint64_t> random_bits(Key k, int bit_width, int64_t n, Mode mode) {
  if (bit_width != 8 && bit_width != 16 && bit_width != 32 && bit_width != 64)
    fail("random::random_bits: bit_width must be 8, 16, 32 or 64, got {}", bit_width);
  if (n < 0) fail("random::random_bits: count must be >= 0, got {}", n);
  std::vector<uint64_t> out(static_cast<size_t>(n));
  const uint64_t mask = bit_width == 64 ? ~0ull : ((1ull << bit_width) - 1);
  if (mode == Mode::partitionable) {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t x0 = uint32_t(uint64_t(i) >> 32), x1 = uint32_t(i);
      hash(k.hi, k.lo, x0, x1);
      out[size_t(i)] = bit_width == 64 ? (uint64_t(x0) << 32) | x1 : uint64_t(x0 ^ x1) & mask;
    }
    return out;
  }
  const uint64_t words = (uint64_t(bit_width) * uint64_t(n) + 31) / 32;
  std::vector<uint32_t> w(static_cast<size_t>(words));
  legacy_words(k, words, w.data());
  if (bit_width == 64) {
    for (int64_t i = 0; i < n; ++i)
      out[size_t(i)] = (uint64_t(w[size_t(i)]) << 32) | w[size_t(i + n)];
  } else {
    const int per_word = 32 / bit_width;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t word = w[size_t(i / per_word)];
      out[size_t(i)] = (word >> (bit_width * int(i % per_word))) & mask;
    }
  }
  return out;
}

}  // namespace tlaloc::random

// Counter-based random keys: threefry2x32 (20 rounds) keys as values, bit-exact with JAX's
// default PRNG (jax.random with jax_default_prng_impl = "threefry2x32").
//
// Source of every algorithm here: JAX 0.5-0.7, jax/_src/prng.py (threefry_seed,
// threefry_2x32, _threefry_split_original / _threefry_split_foldlike, threefry_fold_in,
// _threefry_random_bits_original / _threefry_random_bits_partitionable). The hash itself is
// Threefry-2x32 with 20 rounds from Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"
// (SC'11, the Random123 library), whose known-answer vectors tests/random checks.
//
// Two modes, because JAX has two and they give different bits for split and random_bits:
//   Mode::partitionable  JAX's default since jax 0.5.0 (jax_threefry_partitionable = True):
//                        element i of a draw of any shape hashes the 64-bit counter i.
//   Mode::legacy         JAX before 0.5.0 (or jax_threefry_partitionable = False): the flat
//                        counter array iota(m) is cut in two halves that are hashed in pairs.
// fold_in is the same in both modes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tlaloc/core/array.h"

namespace tlaloc::random {

enum class Mode : uint8_t {
  partitionable,  // jax_threefry_partitionable = True (JAX >= 0.5.0 default)
  legacy,         // jax_threefry_partitionable = False (JAX < 0.5.0 default)
};

// A threefry2x32 key: JAX's key_data(key) is the uint32 pair [hi, lo].
struct Key {
  uint32_t hi = 0;
  uint32_t lo = 0;
  bool operator==(const Key&) const = default;
};

// key(seed) == jax.random.key(seed) == jax.random.PRNGKey(seed) for a 64-bit seed as JAX
// builds it with jax_enable_x64 (a negative int64 seed as its two's complement): [seed >> 32,
// seed & 0xFFFFFFFF]. For 0 <= seed < 2^31 this is also JAX's default (32-bit) mode: [0, seed].
Key key(uint64_t seed);
// key32(seed) == jax.random.key(seed) in JAX's default 32-bit mode for an int32 seed, negative
// ones included: [0, uint32(seed)] (jax.random.key(-1) has key data [0, 4294967295]).
Key key32(int32_t seed);

// The key as a u32[2] Array [hi, lo] (an input for in-program draws, see program.h), and back.
// key_from_data throws tlaloc::Error unless `data` is u32 with 2 elements.
Array key_data(Key k);
Key key_from_data(const Array& data);

// Threefry-2x32, 20 rounds: hashes the counter pair (x0, x1) under key (k0, k1) = (hi, lo).
// Random123's threefry2x32_R(20, ctr = {x0, x1}, key = {k0, k1}).
std::array<uint32_t, 2> threefry2x32(Key k, uint32_t x0, uint32_t x1);

// n new keys (jax.random.split(key, n)). Throws tlaloc::Error if n < 0.
//   partitionable: key i = threefry2x32(key, i >> 32, i & 0xFFFFFFFF).
//   legacy: the 2n words threefry_2x32(key, iota(2n)), key i = words [2i, 2i + 1].
std::vector<Key> split(Key k, int64_t n, Mode mode = Mode::partitionable);
// split into a fixed number of keys, for structured bindings: auto [a, b] = split<2>(key).
template <size_t N>
std::array<Key, N> split(Key k, Mode mode = Mode::partitionable) {
  auto v = split(k, int64_t(N), mode);
  std::array<Key, N> out;
  for (size_t i = 0; i < N; ++i) out[i] = v[i];
  return out;
}

// jax.random.fold_in(key, data): threefry2x32(key, 0, data) as a new key (both modes).
Key fold_in(Key k, uint32_t data);

// The raw stream behind jax.random.bits / _random_bits for `n` values of `bit_width` bits
// (8, 16, 32 or 64), flattened in row-major order; values are returned in uint64.
//   partitionable: value i from h = threefry2x32(key, i >> 32, i & 0xFFFFFFFF):
//     64 bits: (h0 << 32) | h1; 32 bits: h0 ^ h1; 8 / 16 bits: the low bits of h0 ^ h1.
//   legacy: words w = threefry_2x32(key, iota(ceil(bit_width * n / 32))); 32 bits: w[i];
//     64 bits: (w[i] << 32) | w[i + n]; 8 / 16 bits: w's bytes / halves, low part first.
// Throws tlaloc::Error for another bit_width, n < 0, or (legacy) more than 2^32 - 2 words.
std::vector<uint64_t> random_bits(Key k, int bit_width, int64_t n, Mode mode = Mode::partitionable);
// 32-bit stream into out[0, n) without the uint64 round trip (the common, fast case).
void random_bits32(Key k, int64_t n, uint32_t* out, Mode mode = Mode::partitionable);

}  // namespace tlaloc::random

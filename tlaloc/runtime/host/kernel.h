// Internal to the host runtime: what a compiled step looks like at run time.
// A step is a Kernel object chosen once at compile time; running it is one call through its
// function pointer with the Frame of the current run (no per-run lookup by op name).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tlaloc/core/dtype.h"
#include "tlaloc/ir/scalar.h"

namespace tlaloc::runtime::host {

// Per-run state shared by all steps.
struct Frame {
  void* const* ptr = nullptr;  // ptr[v]: storage of IR value v (input, constant, arena, output)
  char* scratch = nullptr;     // pre-allocated scratch, Kernel::scratch_bytes of it per kernel
  int num_threads = 1;         // threads a kernel may use (OpenMP)
};

struct Kernel {
  virtual ~Kernel() = default;
  void (*run)(const Kernel& self, const Frame& frame) = nullptr;
  int64_t scratch_bytes = 0;      // bytes of Frame::scratch this kernel needs
  std::vector<int32_t> reads;     // values whose storage this kernel reads
  std::vector<int32_t> writes;    // values whose storage this kernel writes
  std::vector<int32_t> in_place;  // reads that are read element-wise in write order (fused)
  std::string label;              // for profiles: "fused x12 n=4096: add multiply ..."
  // Optional (null: none): makes the kernel write value `to`, the convert of its result `from`
  // to dtype `dt` that is `from`'s only reader, in place of `from` (which it then no longer
  // writes), with the convert's bits; false, the kernel unchanged, when it cannot.
  bool (*write_converted)(Kernel& self, int32_t from, int32_t to, DType dt) = nullptr;
};

template <class K>
const K& as(const Kernel& k) {
  return static_cast<const K&>(k);
}

// Elements at or above which a kernel splits work over threads: below it, handing parts to the
// run's team (team.h) costs more than it saves (docs/benchmarks.md, "Host lane constants").
inline constexpr int64_t kParallelElements = 1 << 13;
// Elements per block of a fused elementwise program, and bytes of one register. Shorter
// blocks interleave a program's memory streams more finely (docs/benchmarks.md, "Host lane
// constants").
inline constexpr int64_t kBlock = 256;
inline constexpr int64_t kBlockBytes = kBlock * 8;

// C++ type a dtype is computed in: bf16/f16 compute in float, i1 as uint8_t 0/1.
template <DType T>
using Compute = std::conditional_t<
    T == DType::f64, double,
    std::conditional_t<T == DType::s32, int32_t,
                       std::conditional_t<T == DType::u32, uint32_t,
                                          std::conditional_t<T == DType::i1, uint8_t, float>>>>;

// Fast inline bf16 / f16 rounding (same results as core's f32_to_bf16 / f32_to_f16).
using ir::scalar::bits_f32;
using ir::scalar::f32_bits;
// Both cases computed and one selected (no branch), so loops over it vectorize.
inline uint16_t to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t nan = (u >> 16) | 0x40u, rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}
inline float from_bf16(uint16_t h) { return bits_f32(uint32_t(h) << 16); }
// f16 without branches, so loops over them vectorize: each case computed, one selected.
// Subnormal results round through the f32 add x + 0.5 (its ulp, 2^-24, is f16's subnormal step;
// round to nearest even as the default MXCSR does), normal ones by adding the rounding bias.
inline uint16_t to_f16(float f) {
  const uint32_t u = f32_bits(f), a = u & 0x7fffffffu, sign = (u >> 16) & 0x8000u;
  const uint32_t normal = ((a + 0xfffu + ((a >> 13) & 1u)) >> 13) - (112u << 10);
  const uint32_t sub = f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u;
  const uint32_t h = a > 0x7f800000u    ? 0x7e00u
                     : a >= 0x477ff000u ? 0x7c00u
                     : a < 0x38800000u  ? sub
                                        : normal;
  return uint16_t(sign | h);
}
inline float from_f16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  const float sub = float(m) * 5.9604644775390625e-08f;  // m · 2^-24
  const uint32_t bits = e == 0x1f ? 0x7f800000u | (m << 13)
                        : e == 0  ? f32_bits(sub)
                                  : ((e + 112) << 23) | (m << 13);
  return bits_f32(sign | bits);
}

// Storage <-> compute conversions for one element of dtype T.
template <DType T>
inline Compute<T> load_elem(const void* p, int64_t i) {
  if constexpr (T == DType::bf16)
    return from_bf16(static_cast<const uint16_t*>(p)[i]);
  else if constexpr (T == DType::f16)
    return from_f16(static_cast<const uint16_t*>(p)[i]);
  else
    return static_cast<const Compute<T>*>(p)[i];
}
template <DType T>
inline void store_elem(void* p, int64_t i, Compute<T> v) {
  if constexpr (T == DType::bf16)
    static_cast<uint16_t*>(p)[i] = to_bf16(v);
  else if constexpr (T == DType::f16)
    static_cast<uint16_t*>(p)[i] = to_f16(v);
  else
    static_cast<Compute<T>*>(p)[i] = v;
}

// Calls f.template operator()<T>() with the DType as a template argument.
template <class F>
decltype(auto) dispatch(DType t, F&& f) {
  switch (t) {
    case DType::f32:
      return f.template operator()<DType::f32>();
    case DType::f64:
      return f.template operator()<DType::f64>();
    case DType::bf16:
      return f.template operator()<DType::bf16>();
    case DType::f16:
      return f.template operator()<DType::f16>();
    case DType::s32:
      return f.template operator()<DType::s32>();
    case DType::u32:
      return f.template operator()<DType::u32>();
    case DType::i1:
      break;
  }
  return f.template operator()<DType::i1>();
}

}  // namespace tlaloc::runtime::host

// tlaloc's bf16 GEMM (gemm_bf16.h: bf16_gemm_rows) on every path this CPU has (native
// vdpbf16ps, AVX2 fallback, scalar): against an f64 oracle written here on exact bf16 operands
// (every transpose combination, odd K, K = 1, sizes around the 12 x 32 tile and past the 96-row,
// 1024-column and 2048-deep blocks, the bias / add epilogue, nothing written outside C[m0:m1,
// 0:N]); every element bit
// for bit the chain of bf16_gemm_step (the rule the instruction was found to follow) on inputs
// with denormals, infinities, NaNs, over- and underflow and cancellation; the paths equal bit
// for bit, under any MXCSR; row and column splits giving the bits of one call; f32 operands
// rounded while packed giving the bits of to_bf16 first.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tlaloc/core/error.h"
#include "tlaloc/runtime/host/gemm_bf16.h"
#include "tlaloc/runtime/host/kernel.h"

namespace tlaloc::host_test {
namespace {

using runtime::host::bf16_gemm_rows;
using runtime::host::bf16_gemm_step;
using runtime::host::Bf16GemmPath;
using runtime::host::from_bf16;
using runtime::host::to_bf16;

const char* name(Bf16GemmPath p) {
  return p == Bf16GemmPath::native ? "native" : p == Bf16GemmPath::avx2 ? "avx2" : "scalar";
}

// The paths this CPU can run.
std::vector<Bf16GemmPath> paths() {
  std::vector<Bf16GemmPath> v;
  for (auto p : {Bf16GemmPath::native, Bf16GemmPath::avx2, Bf16GemmPath::scalar}) try {
      runtime::host::bf16_gemm_path(p);
      v.push_back(p);
    } catch (const Error&) {
    }
  return v;
}

// bf16_gemm_rows with its pack buffer.
template <class AT, class BT>
void gemm(Bf16GemmPath path, bool ta, bool tb, int64_t m0, int64_t m1, int64_t N, int64_t K,
          const AT* A, int64_t lda, const BT* B, int64_t ldb, float* C, int64_t ldc,
          const float* bias = nullptr, const float* add = nullptr) {
  std::vector<char> pack(size_t(runtime::host::bf16_gemm_pack_bytes(ta, N, K)));
  bf16_gemm_rows(ta, tb, m0, m1, N, K, A, lda, B, ldb, C, ldc, pack.data(), bias, add, path);
}

struct Rng {
  uint64_t s;
  uint32_t next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(s >> 32);
  }
};

// Where element (x, k) of an operand lives: x is a row of op(A) or a column of op(B); stored
// [X, K] (ld), or [K, X] when kmajor (A when ta, B unless tb).
size_t idx(bool kmajor, int64_t ld, int64_t x, int64_t k) {
  return size_t(kmajor ? k * ld + x : x * ld + k);
}
size_t size(bool kmajor, int64_t ld, int64_t X, int64_t K) {
  return size_t(std::max<int64_t>(kmajor ? K * ld : X * ld, 1));
}

// Element (x, k), as f32.
template <class T>
float at(const std::vector<T>& v, bool kmajor, int64_t ld, int64_t x, int64_t k) {
  const T e = v[idx(kmajor, ld, x, k)];
  if constexpr (std::is_same_v<T, float>)
    return e;
  else
    return from_bf16(e);
}

// Moderate bf16 values: +-[1, 2) * 2^[-4, 4], 8 significant bits (products exact in f32).
std::vector<uint16_t> moderate(int64_t X, int64_t K, bool kmajor, int64_t ld, uint64_t seed) {
  Rng r{seed};
  std::vector<uint16_t> v(size(kmajor, ld, X, K));
  for (auto& x : v) {
    const uint32_t u = r.next();
    x = uint16_t((u & 0x8000) | (123 + u % 9) << 7 | (u >> 9 & 0x7f));
  }
  return v;
}

// bf16 bit patterns that stress the rule: x's scale class (x % 3) gives values near 1, near
// 2^-64 (two multiply to near f32's denormal range: FTZ, DAZ of the accumulator) or near 2^64
// (to near overflow); one element in `rare` is special instead: any bits (NaN, inf, denormals),
// or a zero of either sign, an infinity, a quiet or signalling NaN with a payload, a denormal.
// Then every fourth k from 1 repeats the k before with A's sign flipped: those pairs cancel.
std::vector<uint16_t> edgy(int64_t X, int64_t K, bool kmajor, int64_t ld, bool is_a, uint64_t seed,
                           uint32_t rare) {
  Rng r{seed};
  std::vector<uint16_t> v(size(kmajor, ld, X, K));
  const uint16_t special[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1,
                              0x7f81, 0x0001, 0x807f, 0x0080, 0x3f80, 0x7f7f};
  const uint32_t scale[3] = {127, 63, 191};
  for (int64_t x = 0; x < X; ++x)
    for (int64_t k = 0; k < K; ++k) {
      const uint32_t u = r.next(), t = r.next();
      uint32_t e = (u & 0x8000) | (scale[x % 3] - 3 + (u >> 16) % 7) << 7 | (u >> 9 & 0x7f);
      if (t % rare == 0) e = t / rare % 2 ? u >> 16 : special[(u >> 16) % 12];
      v[idx(kmajor, ld, x, k)] = uint16_t(e);
    }
  for (int64_t k = 1; k < K; k += 4)
    for (int64_t x = 0; x < X; ++x)
      v[idx(kmajor, ld, x, k)] = uint16_t(v[idx(kmajor, ld, x, k - 1)] ^ (is_a ? 0x8000 : 0));
  return v;
}

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Epilogue addends: every third a denormal (the epilogue adds it as is), else moderate.
std::vector<float> addends(int64_t n, uint64_t seed) {
  Rng r{seed};
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    const uint32_t u = r.next();
    const uint32_t b = u % 3 ? (u & 0x8000ffffu) | 0x3e000000u : u & 0x803fffffu;
    std::memcpy(&x, &b, 4);
  }
  return v;
}

// The first element where two results' bits differ, or -1.
int64_t first_difference(const std::vector<float>& x, const std::vector<float>& y) {
  for (size_t e = 0; e < x.size(); ++e)
    if (bits(x[e]) != bits(y[e])) return int64_t(e);
  return -1;
}

// The chain of gemm_bf16.h for C[i, j], with the epilogue.
float chain(const std::vector<uint16_t>& A, bool ta, int64_t lda, const std::vector<uint16_t>& B,
            bool tb, int64_t ldb, int64_t i, int64_t j, int64_t K, const float* bias,
            const float* add) {
  float c = 0.0f;
  for (int64_t k = 0; k < K; k += 2) {
    const float a1 = k + 1 < K ? at(A, ta, lda, i, k + 1) : 0.0f,
                b1 = k + 1 < K ? at(B, !tb, ldb, j, k + 1) : 0.0f;
    c = bf16_gemm_step(a1, b1, c);
    c = bf16_gemm_step(at(A, ta, lda, i, k), at(B, !tb, ldb, j, k), c);
  }
  if (bias) c = c + bias[j];
  if (add) c = c + *add;
  return c;
}

TEST(HostBf16Gemm, MatchesF64OracleOnEveryPath) {
  for (Bf16GemmPath path : paths())
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int64_t M : {1, 13, 30})
          for (int64_t N : {1, 31, 33, 70})
            for (int64_t K : {1, 2, 3, 257, 600}) {
              if (path == Bf16GemmPath::scalar && M * N * K > 100000) continue;
              SCOPED_TRACE(testing::Message() << name(path) << " ta=" << ta << " tb=" << tb
                                              << " M=" << M << " N=" << N << " K=" << K);
              const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 5;
              const int64_t m0 = M > 1 ? 1 : 0, rows = M + 2;  // rows outside [m0, M) untouched
              const auto A = moderate(rows, K, ta, lda, 1), B = moderate(N, K, !tb, ldb, 2);
              const auto bias = addends(N, 3), add = addends(rows * ldc, 4);
              std::vector<float> C(size_t(rows * ldc), 7.5f);
              const bool epi = (N + K) % 2 == 0;
              gemm(path, ta, tb, m0, M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc,
                   epi ? bias.data() : nullptr, epi ? add.data() : nullptr);
              for (int64_t i = 0; i < rows; ++i)
                for (int64_t j = 0; j < ldc; ++j) {
                  const float got = C[size_t(i * ldc + j)];
                  if (i < m0 || i >= M || j >= N) {
                    ASSERT_EQ(got, 7.5f) << "wrote outside at " << i << "," << j;
                    continue;
                  }
                  double want = 0, mag = 0;
                  for (int64_t k = 0; k < K; ++k) {
                    const double p = double(at(A, ta, lda, i, k)) * at(B, !tb, ldb, j, k);
                    want += p, mag += std::fabs(p);
                  }
                  if (epi) {
                    const double b = bias[size_t(j)], a = add[size_t(i * ldc + j)];
                    want += b + a, mag += std::fabs(b) + std::fabs(a);
                  }
                  ASSERT_NEAR(got, want, double(K + 3) * 0x1p-24 * mag + 1e-30)
                      << "at " << i << "," << j;
                }
            }
}

// Every element is the chain of bf16_gemm_step, on every path, on edgy inputs.
TEST(HostBf16Gemm, EveryPathIsTheStepChain) {
  for (Bf16GemmPath path : paths())
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int64_t K : {1, 4, 37, 300}) {
          const int64_t M = 14, N = 35, lda = ta ? M : K, ldb = tb ? K : N;
          SCOPED_TRACE(testing::Message()
                       << name(path) << " ta=" << ta << " tb=" << tb << " K=" << K);
          const auto A = edgy(M, K, ta, lda, true, 3 + K, 8 * uint32_t(K)),
                     B = edgy(N, K, !tb, ldb, false, 4 + K, 8 * uint32_t(K));
          const auto bias = addends(N, 5), add = addends(M * N, 6);
          std::vector<float> C(size_t(M * N));
          gemm(path, ta, tb, 0, M, N, K, A.data(), lda, B.data(), ldb, C.data(), N, bias.data(),
               add.data());
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              const float want =
                  chain(A, ta, lda, B, tb, ldb, i, j, K, bias.data(), &add[size_t(i * N + j)]);
              ASSERT_EQ(bits(C[size_t(i * N + j)]), bits(want)) << "at " << i << "," << j;
            }
        }
}

// Past every block edge (M > 96 rows, N > 1024 columns, an odd K > 2048: C reloaded for the
// second K block), with the epilogue: the paths agree bit for bit, sampled elements are the step
// chain on edgy inputs and within the f64 oracle's bound on moderate ones.
TEST(HostBf16Gemm, BlockEdgesKeepTheChain) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool moderate_values : {false, true}) {
        const int64_t M = 100, N = 1060, K = 2101, lda = ta ? M : K, ldb = tb ? K : N;
        SCOPED_TRACE(testing::Message()
                     << "ta=" << ta << " tb=" << tb << " moderate=" << moderate_values);
        const auto A = moderate_values ? moderate(M, K, ta, lda, 17)
                                       : edgy(M, K, ta, lda, true, 17, 8 * uint32_t(K));
        const auto B = moderate_values ? moderate(N, K, !tb, ldb, 18)
                                       : edgy(N, K, !tb, ldb, false, 18, 8 * uint32_t(K));
        const auto bias = addends(N, 19), add = addends(M * N, 20);
        std::vector<float> want;
        for (Bf16GemmPath path : paths()) {
          if (path == Bf16GemmPath::scalar) continue;  // too slow here; the same driver
          std::vector<float> C(size_t(M * N));
          gemm(path, ta, tb, 0, M, N, K, A.data(), lda, B.data(), ldb, C.data(), N, bias.data(),
               add.data());
          if (want.empty())
            want = C;
          else
            EXPECT_EQ(first_difference(C, want), -1) << name(path);
        }
        for (int64_t e = 0; e < M * N; e += 97) {
          const int64_t i = e / N, j = e % N;
          if (!moderate_values) {
            const float c = chain(A, ta, lda, B, tb, ldb, i, j, K, bias.data(), &add[size_t(e)]);
            ASSERT_EQ(bits(want[size_t(e)]), bits(c)) << "at " << i << "," << j;
            continue;
          }
          double exact = double(bias[size_t(j)]) + add[size_t(e)];
          double mag = std::fabs(exact);
          for (int64_t k = 0; k < K; ++k) {
            const double p = double(at(A, ta, lda, i, k)) * at(B, !tb, ldb, j, k);
            exact += p, mag += std::fabs(p);
          }
          ASSERT_NEAR(want[size_t(e)], exact, double(K + 3) * 0x1p-24 * mag) << i << "," << j;
        }
      }
}

// The fallbacks give the native path's bits on the same inputs, under the default MXCSR and
// under round toward zero with DAZ + FTZ (the chain ignores it; all paths' epilogues use it).
TEST(HostBf16Gemm, FallbacksGiveTheNativeBits) {
  if (!runtime::host::bf16_gemm_native()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  const unsigned saved = _mm_getcsr();
  for (unsigned csr : {0x1f80u, 0x1f80u | 0x6000u | 0x8040u})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int64_t K : {3, 40, 519}) {
          const int64_t M = 40, N = 70, lda = ta ? M : K, ldb = tb ? K : N;
          SCOPED_TRACE(testing::Message()
                       << "mxcsr=" << csr << " ta=" << ta << " tb=" << tb << " K=" << K);
          const auto A = edgy(M, K, ta, lda, true, 7 + ta, 50 * uint32_t(K)),
                     B = edgy(N, K, !tb, ldb, false, 8 + tb, 50 * uint32_t(K));
          const auto bias = addends(N, 9), add = addends(M * N, 10);
          std::vector<float> want(size_t(M * N));
          _mm_setcsr(csr);
          gemm(Bf16GemmPath::native, ta, tb, 0, M, N, K, A.data(), lda, B.data(), ldb, want.data(),
               N, bias.data(), add.data());
          for (Bf16GemmPath path : paths()) {
            std::vector<float> C(size_t(M * N));
            gemm(path, ta, tb, 0, M, N, K, A.data(), lda, B.data(), ldb, C.data(), N, bias.data(),
                 add.data());
            EXPECT_EQ(first_difference(C, want), -1) << name(path);
          }
          _mm_setcsr(saved);
        }
}

// Rows split over calls, or columns (B, bias, C and add from the block's first column), give
// the bits of one call.
TEST(HostBf16Gemm, SplitsGiveTheBitsOfOneCall) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int64_t M = 50, N = 100, K = 300, lda = ta ? M : K, ldb = tb ? K : N;
      SCOPED_TRACE(testing::Message() << "ta=" << ta << " tb=" << tb);
      const auto A = edgy(M, K, ta, lda, true, 11, 4000), B = edgy(N, K, !tb, ldb, false, 12, 4000);
      const auto bias = addends(N, 13), add = addends(M * N, 14);
      std::vector<float> one(size_t(M * N)), rows(size_t(M * N)), cols(size_t(M * N));
      gemm(Bf16GemmPath::best, ta, tb, 0, M, N, K, A.data(), lda, B.data(), ldb, one.data(), N,
           bias.data(), add.data());
      const int64_t rs[] = {0, 5, 17, 49, M}, cs[] = {0, 7, 40, N};
      for (int s = 0; s < 4; ++s)
        gemm(Bf16GemmPath::best, ta, tb, rs[s], rs[s + 1], N, K, A.data(), lda, B.data(), ldb,
             rows.data(), N, bias.data(), add.data());
      EXPECT_EQ(first_difference(rows, one), -1) << "rows";
      for (int s = 0; s < 3; ++s) {
        const int64_t j0 = cs[s];
        gemm(Bf16GemmPath::best, ta, tb, 0, M, cs[s + 1] - j0, K, A.data(), lda,
             B.data() + (tb ? j0 * ldb : j0), ldb, cols.data() + j0, N, bias.data() + j0,
             add.data() + j0);
      }
      EXPECT_EQ(first_difference(cols, one), -1) << "columns";
    }
}

// f32 values to round: mostly moderate ones at or next to rounding ties (low half 0x8000 or
// 0x7fff) or with any low bits; one in 16 any bits, one in 16 a NaN, inf or -0, one in 16 the
// largest denormal (rounds up to the smallest normal) or the largest finite value (to inf).
std::vector<float> f32_values(int64_t n, uint64_t seed) {
  Rng r{seed};
  std::vector<float> v(static_cast<size_t>(n));
  // NaNs with their payload only in the low half (to_bf16 must not make them inf), inf, -0.
  const uint32_t special[] = {0x7f800001u, 0xff800100u, 0x7fbfffffu,
                              0x7f800000u, 0x80000000u, 0xffffffffu};
  for (auto& x : v) {
    const uint32_t u = r.next(), t = r.next() % 16;
    uint32_t b = (u & 0x8001ffffu) | 0x3f000000u;  // +-[0.5, 1), any low bits
    if (t < 6) b = (b & 0xffff0000u) | (t < 4 ? 0x8000u : 0x7fffu);
    if (t == 13) b = special[u % 6];
    if (t == 14) b = u;
    if (t == 15) b = (u & 0x80000000u) | (u % 2 ? 0x007fffffu : 0x7f7fffffu);
    std::memcpy(&x, &b, 4);
  }
  return v;
}

// f32 operands, rounded while packed, give the bits of to_bf16 first, on every path; with
// K = 1 against a 1.0 the result is the rounded value itself (a denormal flushed).
TEST(HostBf16Gemm, F32OperandsRoundAsToBf16) {
  for (Bf16GemmPath path : paths())
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int64_t K : {1, 77}) {
          // 29 rows: 12-row panels of 12, 12 and 5; 57 columns: 32-column panels of 32, 25.
          const int64_t M = K == 1 ? 300 : 29, N = K == 1 ? 300 : 57, lda = ta ? M : K,
                        ldb = tb ? K : N;
          SCOPED_TRACE(testing::Message()
                       << name(path) << " ta=" << ta << " tb=" << tb << " K=" << K);
          const auto Af = f32_values(M * K, 15 + K), Bf = f32_values(K * N, 16 + K);
          std::vector<uint16_t> Ab(Af.size()), Bb(Bf.size());
          for (size_t e = 0; e < Af.size(); ++e) Ab[e] = to_bf16(Af[e]);
          for (size_t e = 0; e < Bf.size(); ++e) Bb[e] = to_bf16(Bf[e]);
          std::vector<float> want(size_t(M * N)), C(size_t(M * N));
          gemm(path, ta, tb, 0, M, N, K, Ab.data(), lda, Bb.data(), ldb, want.data(), N);
          gemm(path, ta, tb, 0, M, N, K, Af.data(), lda, Bf.data(), ldb, C.data(), N);
          EXPECT_EQ(first_difference(C, want), -1) << "both f32";
          gemm(path, ta, tb, 0, M, N, K, Af.data(), lda, Bb.data(), ldb, C.data(), N);
          EXPECT_EQ(first_difference(C, want), -1) << "A f32";
          gemm(path, ta, tb, 0, M, N, K, Ab.data(), lda, Bf.data(), ldb, C.data(), N);
          EXPECT_EQ(first_difference(C, want), -1) << "B f32";
          if (K > 1) continue;
          const std::vector<float> one(size_t(std::max(M, N)), 1.0f);
          std::vector<float> col(static_cast<size_t>(M)), row(static_cast<size_t>(N));
          gemm(path, ta, tb, 0, M, 1, 1, Af.data(), 1, one.data(), 1, col.data(), 1);
          gemm(path, ta, tb, 0, 1, N, 1, one.data(), 1, Bf.data(), tb ? 1 : N, row.data(), N);
          for (int64_t i = 0; i < M; ++i)
            ASSERT_EQ(bits(col[size_t(i)]), bits(bf16_gemm_step(from_bf16(Ab[size_t(i)]), 1, 0)))
                << "A row " << i;
          for (int64_t j = 0; j < N; ++j)
            ASSERT_EQ(bits(row[size_t(j)]), bits(bf16_gemm_step(1, from_bf16(Bb[size_t(j)]), 0)))
                << "B column " << j;
        }
}

// Operands pre-packed over all of K (in two ranges, as two threads pack them) give the bits of
// packing in the call: rows split with B (and A from row m0) pre-packed, columns split with A
// (and B from column j0) pre-packed; K past a K block, N past an N block; f32 sources rounded.
TEST(HostBf16Gemm, PrepackedOperandsGiveTheBitsOfPackingInTheCall) {
  using runtime::host::bf16_gemm_prepack;
  using runtime::host::bf16_gemm_prepacked_bytes;
  using runtime::host::bf16_gemm_prepacked_offset;
  for (Bf16GemmPath path : paths()) {
    if (path == Bf16GemmPath::scalar) continue;  // too slow here; the same driver
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool a_f32 : {false, true}) {
          const int64_t M = 100, N = 1060, K = 2101, lda = ta ? M : K, ldb = tb ? K : N;
          SCOPED_TRACE(testing::Message()
                       << name(path) << " ta=" << ta << " tb=" << tb << " a_f32=" << a_f32);
          const auto Ab = edgy(M, K, ta, lda, true, 31, 8 * uint32_t(K));
          const auto Bb = edgy(N, K, !tb, ldb, false, 32, 8 * uint32_t(K));
          const auto Af = f32_values(M * K, 33), Bf = f32_values(K * N, 34);
          const auto bias = addends(N, 35), add = addends(M * N, 36);
          auto run = [&](const auto* A, const auto* B) {
            std::vector<float> want(size_t(M * N)), rows(want.size()), cols(want.size());
            std::vector<char> pack(size_t(runtime::host::bf16_gemm_pack_bytes(ta, N, K)));
            struct alignas(64) Line {
              char b[64];
            };
            std::vector<Line> la(size_t(bf16_gemm_prepacked_bytes(M, K) / 64 + 1)),
                lb(size_t(bf16_gemm_prepacked_bytes(N, K) / 64 + 1));
            char *pa = la.data()->b, *pb = lb.data()->b;
            bf16_gemm_rows(ta, tb, 0, M, N, K, A, lda, B, ldb, want.data(), N, pack.data(),
                           bias.data(), add.data(), path);
            bf16_gemm_prepack(true, ta, K, A, lda, pa, 48, M, path);
            bf16_gemm_prepack(true, ta, K, A, lda, pa, 0, 48, path);
            bf16_gemm_prepack(false, tb, K, B, ldb, pb, 0, 416, path);
            bf16_gemm_prepack(false, tb, K, B, ldb, pb, 416, N, path);
            const int64_t rs[] = {0, 36, 60, M}, cs[] = {0, 64, 1056, N};
            for (int s = 0; s < 3; ++s) {
              const char* a =
                  s == 1 ? pa + bf16_gemm_prepacked_offset(true, rs[s], K, path) : nullptr;
              bf16_gemm_rows(ta, tb, rs[s], rs[s + 1], N, K, A, lda, B, ldb, rows.data(), N,
                             pack.data(), bias.data(), add.data(), path, {a, pb});
              const int64_t j0 = cs[s];
              const char* b =
                  s == 1 ? pb + bf16_gemm_prepacked_offset(false, j0, K, path) : nullptr;
              bf16_gemm_rows(ta, tb, 0, M, cs[s + 1] - j0, K, A, lda, B + (tb ? j0 * ldb : j0), ldb,
                             cols.data() + j0, N, pack.data(), bias.data() + j0, add.data() + j0,
                             path, {pa, b});
            }
            EXPECT_EQ(first_difference(rows, want), -1) << "rows";
            EXPECT_EQ(first_difference(cols, want), -1) << "columns";
          };
          if (a_f32)
            run(Af.data(), Bb.data());
          else
            run(Ab.data(), Bf.data());
        }
  }
}

// A pre-packed operand stays within bf16_gemm_prepacked_bytes on every path, for row counts
// that are no multiple of a panel (the fallback packs A in 6-row panels).
TEST(HostBf16Gemm, PrepackStaysWithinItsBytes) {
  using runtime::host::bf16_gemm_prepack;
  for (Bf16GemmPath path : paths())
    for (bool a : {true, false})
      for (int64_t X : {1, 5, 31, 32, 33, 61, 64, 127, 128, 448})
        for (int64_t K : {1, 30, 31}) {
          SCOPED_TRACE(testing::Message() << name(path) << " a=" << a << " X=" << X << " K=" << K);
          const auto src = moderate(X, K, false, K, 41);
          const int64_t bytes = runtime::host::bf16_gemm_prepacked_bytes(X, K);
          struct alignas(64) Line {
            unsigned char b[64];
          };
          std::vector<Line> buf(size_t(bytes / 64 + 2));
          for (Line& l : buf) std::fill(l.b, l.b + 64, 0xab);
          bf16_gemm_prepack(a, !a, K, src.data(), K, buf.data()->b, 0, X, path);
          const unsigned char* p = buf.data()->b;
          for (int64_t i = bytes; i < int64_t(buf.size()) * 64; ++i)
            ASSERT_EQ(p[i], 0xab) << "written at byte " << i << " of " << bytes;
        }
}

// K = 0: the empty sum +0, then the epilogue.
TEST(HostBf16Gemm, EmptyKGivesTheEpilogue) {
  const float bias[3] = {1.5f, -0.0f, 2.0f}, add[6] = {1, 2, 3, 4, 5, -0.0f};
  float C[6];
  gemm<uint16_t, uint16_t>(Bf16GemmPath::best, false, false, 0, 2, 3, 0, nullptr, 1, nullptr, 3, C,
                           3, bias, add);
  for (int e = 0; e < 6; ++e) EXPECT_EQ(bits(C[e]), bits(0.0f + bias[e % 3] + add[e])) << e;
}

}  // namespace
}  // namespace tlaloc::host_test

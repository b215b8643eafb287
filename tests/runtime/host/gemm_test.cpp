// tlaloc's small f32 GEMM (kernels.h: sgemm_rows) against naive f64 loops written here: row
// counts around its 6-row tiles and 72-row A blocks, column counts around its 16-column tiles
// (masked edges) and 256-column B blocks, K across its 256-deep blocks, lhs [M, K] and [K, M],
// rhs [K, N] and [N, K]; columns past N and rows outside [m0, m1) are left untouched; every
// element is bitwise the chain of std::fma in k order from zero; and a split of the rows over
// several calls gives the same bits as one call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::host_test {
namespace {

using runtime::host::sgemm_rows;
using runtime::host::sgemm_rows_available;

// sgemm_rows with its pack buffer.
void gemm(bool ta, bool tb, int64_t m0, int64_t m1, int64_t N, int64_t K, const float* A,
          int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc) {
  std::vector<float> pack(size_t(runtime::host::sgemm_rows_pack_floats(ta, N, K)));
  sgemm_rows(ta, tb, m0, m1, N, K, A, lda, B, ldb, C, ldc, pack.data());
}

std::vector<float> values(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = float(int32_t(s >> 8) % 2001 - 1000) / 256.0f;  // exact in f32
  }
  return v;
}

TEST(HostGemm, MatchesNaiveF64AcrossTileEdges) {
  if (!sgemm_rows_available()) GTEST_SKIP() << "this CPU has no AVX2 + FMA";
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t M : {1, 5, 6, 7, 13, 80})
        for (int64_t N : {1, 8, 15, 16, 17, 40, 270})
          for (int64_t K : {1, 3, 64, 300}) {
            SCOPED_TRACE(testing::Message()
                         << "ta=" << ta << " tb=" << tb << " M=" << M << " N=" << N << " K=" << K);
            const int64_t lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 3, ldc = N + 5;  // padded
            auto A = values((ta ? K : M) * lda, 1), B = values((tb ? N : K) * ldb, 2);
            std::vector<float> C(size_t(M * ldc), 7.5f);
            gemm(ta, tb, 0, M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc);
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < ldc; ++j) {
                float got = C[size_t(i * ldc + j)];
                if (j >= N) {
                  ASSERT_EQ(got, 7.5f) << "wrote past N at " << i << "," << j;
                  continue;
                }
                double want = 0, mag = 0;
                float chain = 0.0f;
                for (int64_t k = 0; k < K; ++k) {
                  float a = ta ? A[size_t(k * lda + i)] : A[size_t(i * lda + k)];
                  float b = tb ? B[size_t(j * ldb + k)] : B[size_t(k * ldb + j)];
                  want += double(a) * double(b);
                  mag += std::fabs(double(a) * double(b));
                  chain = std::fma(a, b, chain);
                }
                // K roundings of at most 2^-24 relative each, on partial sums <= mag.
                ASSERT_NEAR(got, want, double(K) * 0x1p-24 * mag + 1e-30) << i << "," << j;
                ASSERT_EQ(got, chain) << "not the fma chain in k order at " << i << "," << j;
              }
          }
}

TEST(HostGemm, RowSplitsGiveTheSameBitsAndStayInTheirRows) {
  if (!sgemm_rows_available()) GTEST_SKIP() << "this CPU has no AVX2 + FMA";
  const int64_t M = 64, N = 40, K = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      auto A = values(M * K, 3), B = values(K * N, 4);
      const int64_t lda = ta ? M : K, ldb = tb ? K : N;
      std::vector<float> whole(size_t(M * N)), split(size_t(M * N), 7.5f);
      gemm(ta, tb, 0, M, N, K, A.data(), lda, B.data(), ldb, whole.data(), N);
      gemm(ta, tb, 0, 13, N, K, A.data(), lda, B.data(), ldb, split.data(), N);
      for (int64_t i = 13 * N; i < M * N; ++i) ASSERT_EQ(split[size_t(i)], 7.5f) << i;
      gemm(ta, tb, 13, 32, N, K, A.data(), lda, B.data(), ldb, split.data(), N);
      gemm(ta, tb, 32, M, N, K, A.data(), lda, B.data(), ldb, split.data(), N);
      for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(split[size_t(i)], whole[size_t(i)]) << i;
    }
}

}  // namespace
}  // namespace tlaloc::host_test

// tlaloc's small f32 GEMM (kernels.h: sgemm_rows) against naive f64 loops written here: row
// counts around its 6-row tiles, column counts around its 16-column tiles (masked edges),
// lhs [M, K] and [K, M]; columns past N and rows outside [m0, m1) are left untouched; and a
// split of the rows over several calls gives the same bits as one call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tlaloc/runtime/host/kernels.h"

namespace tlaloc::host_test {
namespace {

using runtime::host::sgemm_rows;
using runtime::host::sgemm_rows_available;

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
    for (int64_t M : {1, 5, 6, 7, 13})
      for (int64_t N : {1, 8, 15, 16, 17, 40})
        for (int64_t K : {1, 3, 64}) {
          SCOPED_TRACE(testing::Message() << "ta=" << ta << " M=" << M << " N=" << N << " K=" << K);
          const int64_t lda = (ta ? M : K) + 2, ldb = N + 3, ldc = N + 5;  // padded rows
          auto A = values((ta ? K : M) * lda, 1), B = values(K * ldb, 2);
          std::vector<float> C(size_t(M * ldc), 7.5f);
          sgemm_rows(ta, 0, M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              float got = C[size_t(i * ldc + j)];
              if (j >= N) {
                ASSERT_EQ(got, 7.5f) << "wrote past N at " << i << "," << j;
                continue;
              }
              double want = 0, mag = 0;
              for (int64_t k = 0; k < K; ++k) {
                double a = ta ? A[size_t(k * lda + i)] : A[size_t(i * lda + k)];
                want += a * double(B[size_t(k * ldb + j)]);
                mag += std::fabs(a * double(B[size_t(k * ldb + j)]));
              }
              // K roundings of at most 2^-24 relative each, on partial sums <= mag.
              ASSERT_NEAR(got, want, double(K) * 0x1p-24 * mag + 1e-30) << i << "," << j;
            }
        }
}

TEST(HostGemm, RowSplitsGiveTheSameBitsAndStayInTheirRows) {
  if (!sgemm_rows_available()) GTEST_SKIP() << "this CPU has no AVX2 + FMA";
  const int64_t M = 64, N = 40, K = 100;
  for (bool ta : {false, true}) {
    auto A = values(M * K, 3), B = values(K * N, 4);
    const int64_t lda = ta ? M : K;
    std::vector<float> whole(size_t(M * N)), split(size_t(M * N), 7.5f);
    sgemm_rows(ta, 0, M, N, K, A.data(), lda, B.data(), N, whole.data(), N);
    sgemm_rows(ta, 0, 13, N, K, A.data(), lda, B.data(), N, split.data(), N);
    for (int64_t i = 13 * N; i < M * N; ++i) ASSERT_EQ(split[size_t(i)], 7.5f) << i;
    sgemm_rows(ta, 13, 32, N, K, A.data(), lda, B.data(), N, split.data(), N);
    sgemm_rows(ta, 32, M, N, K, A.data(), lda, B.data(), N, split.data(), N);
    for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(split[size_t(i)], whole[size_t(i)]) << i;
  }
}

}  // namespace
}  // namespace tlaloc::host_test

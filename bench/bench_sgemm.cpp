// OpenBLAS sgemm at the fmnist step's shapes (batch 128, 784 -> 256 -> 10), as the reference
// rate for bench/run_fmnist_bench.sh: items_per_second is FLOP/s.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <vector>

namespace {

void gemm(int m, int n, int k, bool ta, bool tb, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
}

void BM_SgemmStepShapes(benchmark::State& state) {
  const int B = 128, I = 784, H = 256, O = 10;
  std::vector<float> x(size_t(B) * I, 0.5f), w1(size_t(H) * I, 0.01f), h(size_t(B) * H),
      w2(size_t(O) * H, 0.01f), z(size_t(B) * O), gw1(size_t(H) * I), gh(size_t(B) * H),
      gw2(size_t(O) * H);
  double flops = 0;
  for (auto _ : state) {
    gemm(B, H, I, false, true, x.data(), w1.data(), h.data());    // x W1ᵀ
    gemm(B, O, H, false, true, h.data(), w2.data(), z.data());    // h W2ᵀ
    gemm(O, H, B, true, false, z.data(), h.data(), gw2.data());   // dW2 = dzᵀ h
    gemm(B, H, O, false, false, z.data(), w2.data(), gh.data());  // dh = dz W2
    gemm(H, I, B, true, false, gh.data(), x.data(), gw1.data());  // dW1 = dhᵀ x
    benchmark::ClobberMemory();
    flops += 2.0 * B * (2.0 * I * H + 3.0 * H * O);
  }
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SgemmStepShapes)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

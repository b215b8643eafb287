// tlaloc's bf16 GEMM (runtime/host/gemm_bf16.h) against OpenBLAS sgemm on one thread, at the
// three GEMMs of a linear layer's training step (tokens T, d_in -> d_out): forward Y = X W
// (M = T, N = d_out, K = d_in), weight gradient dW = X^T dY (ta: M = d_in, N = d_out, K = T),
// input gradient dX = dY W^T (tb: M = T, N = d_in, K = d_out). FLOPS counts 2 M N K per GEMM.
// Arms: native (vdpbf16ps), fallback (AVX2, the same bits), native_f32a (A given as f32, rounded
// while packed: a convert folded into the GEMM), sgemm (cblas_sgemm on f32 copies). Run with
// OPENBLAS_CORETYPE=SkylakeX on AVX-512 CPUs (bench_env.sh); OpenBLAS is held to one thread.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <vector>

#include "tlaloc/runtime/host/gemm_bf16.h"
#include "tlaloc/runtime/host/kernel.h"

namespace {

using tlaloc::runtime::host::Bf16GemmPath;

enum Arm { kNative, kFallback, kNativeF32A, kSgemm };

struct Gemm {
  int64_t M, N, K;
  bool ta, tb;
};

Gemm shape(const benchmark::State& s) {
  const int64_t T = s.range(0), din = s.range(1), dout = s.range(2);
  switch (s.range(3)) {
    case 0:
      return {T, dout, din, false, false};
    case 1:
      return {din, dout, T, true, false};
    default:
      return {T, din, dout, false, true};
  }
}

std::vector<float> values(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = tlaloc::runtime::host::from_bf16(
        tlaloc::runtime::host::to_bf16(float(int32_t(s >> 8) % 2001 - 1000) / 1024.0f));
  }
  return v;
}

void run(benchmark::State& state, Arm arm) {
  const Gemm g = shape(state);
  const int64_t lda = g.ta ? g.M : g.K, ldb = g.tb ? g.K : g.N;
  const std::vector<float> Af = values(g.M * g.K, 1), Bf = values(g.K * g.N, 2);
  std::vector<uint16_t> Ab(Af.size()), Bb(Bf.size());
  for (size_t i = 0; i < Af.size(); ++i) Ab[i] = tlaloc::runtime::host::to_bf16(Af[i]);
  for (size_t i = 0; i < Bf.size(); ++i) Bb[i] = tlaloc::runtime::host::to_bf16(Bf[i]);
  std::vector<float> C(size_t(g.M * g.N));
  std::vector<char> pack(size_t(tlaloc::runtime::host::bf16_gemm_pack_bytes(g.ta, g.N, g.K)));
  for (auto _ : state) {
    switch (arm) {
      case kNative:
      case kFallback:
        tlaloc::runtime::host::bf16_gemm_rows(
            g.ta, g.tb, 0, g.M, g.N, g.K, Ab.data(), lda, Bb.data(), ldb, C.data(), g.N,
            pack.data(), nullptr, nullptr,
            arm == kNative ? Bf16GemmPath::native : Bf16GemmPath::avx2);
        break;
      case kNativeF32A:
        tlaloc::runtime::host::bf16_gemm_rows(g.ta, g.tb, 0, g.M, g.N, g.K, Af.data(), lda,
                                              Bb.data(), ldb, C.data(), g.N, pack.data(), nullptr,
                                              nullptr, Bf16GemmPath::native);
        break;
      case kSgemm:
        cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans,
                    g.tb ? CblasTrans : CblasNoTrans, int(g.M), int(g.N), int(g.K), 1.0f, Af.data(),
                    int(lda), Bf.data(), int(ldb), 0.0f, C.data(), int(g.N));
        break;
    }
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * double(g.M) * double(g.N) * double(g.K),
                                               benchmark::Counter::kIsIterationInvariantRate);
}

// (T, d_in, d_out, pass): pass 0 forward, 1 weight gradient, 2 input gradient.
void shapes(benchmark::internal::Benchmark* b) {
  for (auto l : {std::vector<int64_t>{2048, 256, 256},
                 {4096, 1024, 1024},
                 {8192, 512, 2048},
                 {4096, 2048, 512},
                 {2048, 256, 8000}})
    for (int64_t pass = 0; pass < 3; ++pass) b->Args({l[0], l[1], l[2], pass});
  b->ArgNames({"T", "din", "dout", "pass"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

void BM_Bf16Native(benchmark::State& s) {
  if (!tlaloc::runtime::host::bf16_gemm_native()) return s.SkipWithError("no AVX512_BF16");
  run(s, kNative);
}
void BM_Bf16Fallback(benchmark::State& s) { run(s, kFallback); }
void BM_Bf16NativeF32A(benchmark::State& s) {
  if (!tlaloc::runtime::host::bf16_gemm_native()) return s.SkipWithError("no AVX512_BF16");
  run(s, kNativeF32A);
}
void BM_Sgemm(benchmark::State& s) { run(s, kSgemm); }
BENCHMARK(BM_Bf16Native)->Apply(shapes);
BENCHMARK(BM_Bf16Fallback)->Apply(shapes);
BENCHMARK(BM_Bf16NativeF32A)->Apply(shapes);
BENCHMARK(BM_Sgemm)->Apply(shapes);

}  // namespace

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// The fused optimizer update on the host lane (issue 5): AdamW's train-step program with the
// gradient given as an input, for 1M, 4M and 16M f32 elements. Reports GB/s at 28 B/element
// (read p, g, m, v; write p, m, v) next to a memory-copy bandwidth measured in the same run
// (copy_GBps: bytes read + written by an OpenMP-parallel memcpy over the same thread count)
// and their ratio (frac_of_copy). hand_fused is a plain C++ loop of the same math: the ceiling.
// Threads: OMP_NUM_THREADS. bench/run_optim_bench.sh compares against torch's foreach AdamW.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "tlaloc/optim/update.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

namespace {
using namespace tlaloc;
using Clock = std::chrono::steady_clock;

constexpr double kBytesPerElement = 28;

// Copy bandwidth in GB/s (read + write) over buffers of 16 B/element, best of 5.
double copy_gbps(int64_t n) {
  static std::vector<std::pair<int64_t, double>> cache;
  for (auto [k, v] : cache)
    if (k == n) return v;
  Array src = Array::filled(DType::f32, Shape{4 * n}, 1.0), dst(DType::f32, Shape{4 * n});
  const auto* s = static_cast<const char*>(src.raw());
  auto* d = static_cast<char*>(dst.raw());
  const int64_t bytes = int64_t(src.nbytes());
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t lo = bytes * t / nt, hi = bytes * (t + 1) / nt;
      std::memcpy(d + lo, s + lo, size_t(hi - lo));
    }
    double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * double(bytes) / sec / 1e9);
  }
  benchmark::DoNotOptimize(dst.raw());
  cache.emplace_back(n, best);
  return best;
}

void report(benchmark::State& st, int64_t n, double seconds) {
  const double gbps = kBytesPerElement * double(n) * double(st.iterations()) / seconds / 1e9;
  const double copy = copy_gbps(n);
  st.counters["GBps"] = gbps;
  st.counters["copy_GBps"] = copy;
  st.counters["frac_of_copy"] = gbps / copy;
  st.counters["threads"] = omp_get_max_threads();
}

// The train step of AdamW for G(g, p) = (0, g): the update segment alone.
void BM_AdamWProgram(benchmark::State& st) {
  const int64_t n = st.range(0);
  const bool check_finite = st.range(1) != 0;
  ir::Function g_fn = trace::capture(
      [](std::span<const trace::Tensor> x) {
        return std::vector<trace::Tensor>{trace::scalar(0.0), x[0]};
      },
      {{DType::f32, Shape{n}}, {DType::f32, Shape{n}}}, {"g", "p"});
  optim::UpdateOptions o;
  o.check_finite = check_finite;
  optim::TrainStep ts = optim::append_update(optim::AdamW{.lr = 1e-3}, g_fn, 1, o);
  auto exe = runtime::host::compile(ts.fn);
  std::vector<Array> in;
  in.push_back(Array::filled(DType::f32, Shape{n}, 0.01));
  in.push_back(Array::filled(DType::f32, Shape{n}, 1.0));
  for (Array& s : optim::init_state(ts.state)) in.push_back(std::move(s));
  for (Array& s : ts.scalar_inputs(ts.group_lr())) in.push_back(std::move(s));
  auto t0 = Clock::now();
  for (auto _ : st) {
    std::vector<Array> out = exe->run_donated(in);
    for (const ir::Alias& a : ts.fn.aliases) in[size_t(a.input)] = std::move(out[size_t(a.output)]);
  }
  report(st, n, std::chrono::duration<double>(Clock::now() - t0).count());
}

// The same math as one hand-written OpenMP loop (bias corrections hoisted): the ceiling.
void BM_AdamWHandFused(benchmark::State& st) {
  const int64_t n = st.range(0);
  Array g = Array::filled(DType::f32, Shape{n}, 0.01), p = Array::filled(DType::f32, Shape{n}, 1);
  Array m(DType::f32, Shape{n}), v(DType::f32, Shape{n});
  float* P = p.data<float>();
  float* M = m.data<float>();
  float* V = v.data<float>();
  const float* G = g.data<float>();
  const float lr = 1e-3f, wd = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  int64_t t = 0;
  auto t0 = Clock::now();
  for (auto _ : st) {
    ++t;
    const float step_size = float(lr / (1 - std::pow(0.9, double(t))));
    const float inv_bc2 = float(1 / std::sqrt(1 - std::pow(0.999, double(t))));
    const float decay = 1 - lr * wd;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float mi = b1 * M[i] + (1 - b1) * G[i];
      float vi = b2 * V[i] + (1 - b2) * G[i] * G[i];
      M[i] = mi;
      V[i] = vi;
      P[i] = P[i] * decay - step_size * mi / (std::sqrt(vi) * inv_bc2 + eps);
    }
    benchmark::ClobberMemory();
  }
  report(st, n, std::chrono::duration<double>(Clock::now() - t0).count());
}

void sizes(benchmark::internal::Benchmark* b, bool with_flag) {
  for (int64_t n : {int64_t(1) << 20, int64_t(4) << 20, int64_t(16) << 20}) {
    if (with_flag) {
      b->Args({n, 1})->Args({n, 0});
    } else {
      b->Args({n});
    }
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}

}  // namespace

BENCHMARK(BM_AdamWProgram)->ArgNames({"n", "check_finite"})->Apply([](auto* b) { sizes(b, true); });
BENCHMARK(BM_AdamWHandFused)->ArgNames({"n"})->Apply([](auto* b) { sizes(b, false); });
BENCHMARK_MAIN();

// The fused optimizer update on the host lane (issue 5): AdamW's train-step program with the
// gradient given as an input, for 1M, 4M and 16M f32 elements. Every iteration times one update
// step and, right before it, one memory copy (an OpenMP-parallel memcpy of 16 B/element over
// the same thread count, counted as bytes read + written), so both arms see the same machine
// load. Counters: GBps (28 B/element: read p, g, m, v; write p, m, v) from the median step
// time, copy_GBps from the median copy time, frac_of_copy the median over iterations of the
// step's rate / the adjacent copy's rate; *_best from the fastest step and copy.
// hand_fused is a plain C++ loop of the same math. Threads: OMP_NUM_THREADS.
// bench/run_optim_bench.sh compares against torch's foreach AdamW.
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

constexpr double kBytesPerElement = 28, kCopyBytesPerElement = 32;

double seconds_of(auto&& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

// Copies 16 B/element with every thread copying its own contiguous share.
struct Copy {
  Array src, dst;
  explicit Copy(int64_t n)
      : src(Array::filled(DType::f32, Shape{4 * n}, 1.0)),
        dst(Array::filled(DType::f32, Shape{4 * n}, 0.0)) {}
  void operator()() {
    const auto* s = static_cast<const char*>(src.raw());
    auto* d = static_cast<char*>(dst.raw());
    const int64_t bytes = int64_t(src.nbytes());
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t lo = bytes * t / nt, hi = bytes * (t + 1) / nt;
      std::memcpy(d + lo, s + lo, size_t(hi - lo));
    }
    benchmark::DoNotOptimize(dst.raw());
  }
};

// Runs copy, step, copy, step, ... and reports the counters described at the top.
void run_pairs(benchmark::State& st, int64_t n, const auto& step) {
  Copy copy(n);
  copy();
  step();  // warm-up: first touch, thread pool
  std::vector<double> ts, tc, frac;
  for (auto _ : st) {
    double c = seconds_of(copy);
    double s = seconds_of(step);
    st.SetIterationTime(s);
    ts.push_back(s);
    tc.push_back(c);
    frac.push_back(kBytesPerElement / s / (kCopyBytesPerElement / c));
  }
  const double gb = double(n) / 1e9;
  st.counters["GBps"] = kBytesPerElement * gb / median(ts);
  st.counters["copy_GBps"] = kCopyBytesPerElement * gb / median(tc);
  st.counters["frac_of_copy"] = median(frac);
  st.counters["GBps_best"] = kBytesPerElement * gb / *std::min_element(ts.begin(), ts.end());
  st.counters["copy_GBps_best"] =
      kCopyBytesPerElement * gb / *std::min_element(tc.begin(), tc.end());
  st.counters["threads"] = omp_get_max_threads();
}

// The train step of AdamW for G(g, p) = (0, g): the update segment alone.
void BM_AdamWProgram(benchmark::State& st) {
  const int64_t n = st.range(0);
  ir::Function g_fn = trace::capture(
      [](std::span<const trace::Tensor> x) {
        return std::vector<trace::Tensor>{trace::scalar(0.0), x[0]};
      },
      {{DType::f32, Shape{n}}, {DType::f32, Shape{n}}}, {"g", "p"});
  optim::UpdateOptions o;
  o.check_finite = st.range(1) != 0;
  optim::TrainStep ts = optim::append_update(optim::AdamW{.lr = 1e-3}, g_fn, 1, o);
  auto exe = runtime::host::compile(ts.fn);
  std::vector<Array> in;
  in.push_back(Array::filled(DType::f32, Shape{n}, 0.01));
  in.push_back(Array::filled(DType::f32, Shape{n}, 1.0));
  for (Array& s : optim::init_state(ts.state)) in.push_back(std::move(s));
  for (Array& s : ts.scalar_inputs(ts.group_lr())) in.push_back(std::move(s));
  run_pairs(st, n, [&] {
    std::vector<Array> out = exe->run_donated(in);
    for (const ir::Alias& a : ts.fn.aliases) in[size_t(a.input)] = std::move(out[size_t(a.output)]);
  });
}

// The same math as one hand-written OpenMP loop (bias corrections hoisted).
void BM_AdamWHandFused(benchmark::State& st) {
  const int64_t n = st.range(0);
  Array g = Array::filled(DType::f32, Shape{n}, 0.01), p = Array::filled(DType::f32, Shape{n}, 1);
  Array m = Array::filled(DType::f32, Shape{n}, 0), v = Array::filled(DType::f32, Shape{n}, 0);
  float* P = p.data<float>();
  float* M = m.data<float>();
  float* V = v.data<float>();
  const float* G = g.data<float>();
  const float lr = 1e-3f, wd = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  int64_t t = 0;
  run_pairs(st, n, [&] {
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
  });
}

void sizes(benchmark::internal::Benchmark* b, bool with_flag) {
  for (int64_t n : {int64_t(1) << 20, int64_t(4) << 20, int64_t(16) << 20}) {
    if (with_flag) {
      b->Args({n, 1})->Args({n, 0});
    } else {
      b->Args({n});
    }
  }
  b->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(1.0);
}

}  // namespace

BENCHMARK(BM_AdamWProgram)->ArgNames({"n", "check_finite"})->Apply([](auto* b) { sizes(b, true); });
BENCHMARK(BM_AdamWHandFused)->ArgNames({"n"})->Apply([](auto* b) { sizes(b, false); });
BENCHMARK_MAIN();

// Host runtime benchmarks.
//  1. Dispatch overhead: a chain of 1,000 tiny elementwise ops (8 f32 elements) run 10^4
//     times, fused and unfused (Options::fuse = false), against a plain C++ loop doing the same
//     arithmetic. Arms alternate within each repetition; the table reports the median and the
//     min..max spread of ns per op, and each arm's overhead over the baseline.
//  2. Training steps (Google Benchmark): MLP 784->256->10 (batch 128, softmax cross-entropy,
//     AdamW) and the disc MLP 2->16->16->1 (512 points, MSE, Adam), each one compiled
//     executable run with donation.
//  3. Max pooling forward + backward (reduce_window + select_and_scatter) on CNN shapes.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/composites/composites.h"
#include "tlaloc/optim/update.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

using namespace tlaloc;
using ir::Op;

namespace {

constexpr int kChainOps = 1000;
constexpr int64_t kChainWidth = 8;
constexpr int kChainRuns = 10000;

// op i of the chain: add, multiply, subtract, maximum with y (keeps values bounded).
Op chain_op(int i) {
  static const Op ops[] = {Op::add, Op::multiply, Op::subtract, Op::maximum};
  return ops[i % 4];
}

ir::Function chain_fn() {
  ir::Builder b("chain");
  auto x = b.parameter({DType::f32, {kChainWidth}}, "x");
  auto y = b.parameter({DType::f32, {kChainWidth}}, "y");
  auto v = x;
  for (int i = 0; i < kChainOps; ++i) v = b.binary(chain_op(i), v, y);
  return b.build({v});
}

std::vector<Array> chain_inputs() {
  return {Array::filled(DType::f32, {kChainWidth}, 0.5),
          Array::filled(DType::f32, {kChainWidth}, 0.999)};
}

// The same arithmetic as a plain loop (the baseline).
void chain_baseline(const float* x, const float* y, float* out) {
  float v[kChainWidth];
  for (int64_t j = 0; j < kChainWidth; ++j) v[j] = x[j];
  for (int i = 0; i < kChainOps; ++i) {
    switch (i % 4) {
      case 0:
        for (int64_t j = 0; j < kChainWidth; ++j) v[j] += y[j];
        break;
      case 1:
        for (int64_t j = 0; j < kChainWidth; ++j) v[j] *= y[j];
        break;
      case 2:
        for (int64_t j = 0; j < kChainWidth; ++j) v[j] -= y[j];
        break;
      default:
        for (int64_t j = 0; j < kChainWidth; ++j) v[j] = std::max(v[j], y[j]);
    }
    benchmark::ClobberMemory();
  }
  for (int64_t j = 0; j < kChainWidth; ++j) out[j] = v[j];
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void dispatch_table() {
  auto f = chain_fn();
  auto fused = runtime::host::compile(f, {.num_threads = 1, .fuse = true});
  auto unfused = runtime::host::compile(f, {.num_threads = 1, .fuse = false});
  auto in = chain_inputs();
  Array out(DType::f32, {kChainWidth});
  // ns per op of each arm, per repetition; arms alternate inside a repetition.
  const int reps = 7;
  std::vector<std::vector<double>> ns(3);
  for (int r = 0; r < reps; ++r) {
    for (int arm = 0; arm < 3; ++arm) {
      auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < kChainRuns; ++k) {
        if (arm == 0) {
          chain_baseline(in[0].data<float>(), in[1].data<float>(), out.data<float>());
          benchmark::DoNotOptimize(out.raw());
        } else {
          auto o = (arm == 1 ? fused : unfused)->run(in);
          benchmark::DoNotOptimize(o[0].raw());
        }
      }
      ns[size_t(arm)].push_back(seconds_since(t0) * 1e9 / double(kChainRuns) / kChainOps);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const char* names[] = {"baseline (plain C++ loop)", "tlaloc fused",
                         "tlaloc unfused (fuse=false)"};
  double base = median(ns[0]);
  fmt::print(
      "Dispatch overhead: chain of {} elementwise ops on f32[{}], {} runs, {} alternating reps\n",
      kChainOps, kChainWidth, kChainRuns, reps);
  fmt::print("{:<30} {:>12} {:>20} {:>18} {:>10}\n", "arm", "ns/op median", "spread (min..max)",
             "overhead ns/op", "x baseline");
  for (int arm = 0; arm < 3; ++arm) {
    auto& v = ns[size_t(arm)];
    double m = median(v);
    fmt::print("{:<30} {:>12.2f} {:>9.2f}..{:<9.2f} {:>18.2f} {:>10.1f}\n", names[arm], m,
               *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()),
               m - base, m / base);
  }
  fmt::print("target: overhead <= 1000 ns/op\n\n");
}

void BM_ChainFused(benchmark::State& st) {
  auto exe = runtime::host::compile(chain_fn(), {.num_threads = 1, .fuse = st.range(0) != 0});
  auto in = chain_inputs();
  for (auto _ : st) benchmark::DoNotOptimize(exe->run(in));
  st.counters["ns_per_op"] =
      benchmark::Counter(double(kChainOps), benchmark::Counter::kIsIterationInvariantRate |
                                                benchmark::Counter::kInvert);
}
BENCHMARK(BM_ChainFused)->Arg(1)->Arg(0)->Iterations(kChainRuns)->Unit(benchmark::kMicrosecond);

// --- the fused optimizer pass ------------------------------------------------------------
// Adam(W)-style update of n parameters as plain IR: reads p, g, m, v and writes p', m', v' in
// place (donated): 28 bytes per element. Reports the effective bandwidth.
void BM_AdamPass(benchmark::State& st) {
  const int64_t n = st.range(0);
  ir::Builder b("adam");
  auto p = b.parameter({DType::f32, {n}}, "p");
  auto g = b.parameter({DType::f32, {n}}, "g");
  auto m = b.parameter({DType::f32, {n}}, "m");
  auto v = b.parameter({DType::f32, {n}}, "v");
  auto lr = b.parameter({DType::f32, {}}, "lr");
  auto c = [&](double x) { return b.broadcast_in_dim(b.scalar(DType::f32, x), {n}, {}); };
  auto mul = [&](ir::ValueId x, ir::ValueId y) { return b.binary(Op::multiply, x, y); };
  auto add = [&](ir::ValueId x, ir::ValueId y) { return b.binary(Op::add, x, y); };
  auto m2 = add(mul(c(0.9), m), mul(c(0.1), g));
  auto v2 = add(mul(c(0.999), v), mul(c(0.001), mul(g, g)));
  auto den = add(b.unary(Op::sqrt, mul(v2, c(1 / 0.001))), c(1e-8));
  auto upd = b.binary(Op::divide, mul(m2, c(1 / 0.1)), den);
  auto p2 = b.binary(Op::subtract, mul(p, c(1 - 1e-5)), mul(b.broadcast_in_dim(lr, {n}, {}), upd));
  auto f = b.build({p2, m2, v2});
  f.aliases = {{0, 0}, {1, 2}, {2, 3}};
  auto exe = runtime::host::compile(f, {.num_threads = int(st.range(1))});
  std::vector<Array> in = {Array::filled(DType::f32, {n}, 0.5),
                           Array::filled(DType::f32, {n}, 0.01), Array::filled(DType::f32, {n}, 0),
                           Array::filled(DType::f32, {n}, 0), Array::scalar(1e-3f)};
  for (auto _ : st) {
    auto out = exe->run_donated(in);
    in[0] = std::move(out[0]);
    in[2] = std::move(out[1]);
    in[3] = std::move(out[2]);
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * n * 28);
}
BENCHMARK(BM_AdamPass)
    ->Args({200704, 1})
    ->Args({200704, 2})
    ->Args({1 << 22, 2})
    ->Unit(benchmark::kMicrosecond);

// --- training steps --------------------------------------------------------------------------
struct Step {
  optim::TrainStep ts;
  std::unique_ptr<runtime::Executable> exe;
  std::vector<Array> in;
  void run() {
    auto out = exe->run_donated(in);
    for (int i = 0; i < ts.num_params; ++i)
      in[size_t(ts.param_input(i))] = std::move(out[size_t(ts.param_output(i))]);
    for (int j = 0; j < int(ts.state.size()); ++j)
      in[size_t(ts.state_input(j))] = std::move(out[size_t(ts.state_output(j))]);
    benchmark::DoNotOptimize(out[0].raw());
  }
};

Array pseudo(DType t, Shape s, double scale, uint32_t seed) {
  std::vector<double> v(size_t(s.numel()));
  uint32_t x = seed;
  for (auto& e : v) {
    x = x * 1664525u + 1013904223u;
    e = scale * (double(x >> 8) / double(1 << 24) - 0.5);
  }
  return Array::from_doubles(t, std::move(s), v);
}

Step make_step(const trace::TraceFn& loss, std::vector<ir::TensorType> types, int num_data,
               const optim::Optimizer& opt, int threads) {
  std::vector<int> wrt;
  for (int i = num_data; i < int(types.size()); ++i) wrt.push_back(i);
  auto fwd = trace::capture(loss, types);
  auto g = autodiff::value_and_grad(fwd, wrt);
  Step s;
  s.ts = optim::append_update(opt, g, int(wrt.size()));
  s.exe = runtime::host::compile(s.ts.fn, {.num_threads = threads});
  for (size_t i = 0; i < types.size(); ++i)
    s.in.push_back(
        pseudo(types[i].dtype, types[i].shape, i < size_t(num_data) ? 2.0 : 0.1, uint32_t(i + 1)));
  for (auto& a : optim::init_state(s.ts.state)) s.in.push_back(std::move(a));
  auto lr = s.ts.group_lr();
  for (auto& a : s.ts.scalar_inputs(lr)) s.in.push_back(std::move(a));
  return s;
}

void BM_MlpStep(benchmark::State& st) {
  using trace::Tensor;
  auto loss = [](std::span<const Tensor> a) -> std::vector<Tensor> {
    auto h = trace::relu(trace::matmul(a[0], trace::transpose(a[2])) + a[3]);
    auto logits = trace::matmul(h, trace::transpose(a[4])) + a[5];
    return {-trace::mean(trace::sum(a[1] * trace::log_softmax(logits), {1}))};
  };
  auto s = make_step(loss,
                     {{DType::f32, {128, 784}},
                      {DType::f32, {128, 10}},
                      {DType::f32, {256, 784}},
                      {DType::f32, {256}},
                      {DType::f32, {10, 256}},
                      {DType::f32, {10}}},
                     2, optim::AdamW{}, int(st.range(0)));
  for (auto _ : st) s.run();
  st.SetLabel(fmt::format("{} threads, {} IR nodes", st.range(0), s.ts.fn.nodes.size()));
}
BENCHMARK(BM_MlpStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(1.0);

void BM_DiscStep(benchmark::State& st) {
  using trace::Tensor;
  auto loss = [](std::span<const Tensor> a) -> std::vector<Tensor> {
    auto h = trace::relu(trace::matmul(a[0], trace::transpose(a[2])) + a[3]);
    h = trace::relu(trace::matmul(h, trace::transpose(a[4])) + a[5]);
    auto pred = trace::matmul(h, trace::transpose(a[6])) + a[7];
    return {trace::mean(trace::square(pred - a[1]))};
  };
  auto s = make_step(loss,
                     {{DType::f32, {512, 2}},
                      {DType::f32, {512, 1}},
                      {DType::f32, {16, 2}},
                      {DType::f32, {16}},
                      {DType::f32, {16, 16}},
                      {DType::f32, {16}},
                      {DType::f32, {1, 16}},
                      {DType::f32, {1}}},
                     2, optim::Adam{.lr = 0.02}, 1);
  for (auto _ : st) s.run();
  st.SetLabel(fmt::format("{} IR nodes", s.ts.fn.nodes.size()));
}
BENCHMARK(BM_DiscStep)->Unit(benchmark::kMicrosecond)->MinTime(0.5);

// A 2-layer pre-LN transformer LM step: d_model 128, 4 heads, MLP 512, seq 16, batch 4,
// vocab 64, causal attention, softmax cross-entropy, AdamW (the 2.5 ms target).
void BM_TransformerStep(benchmark::State& st) {
  using trace::Tensor;
  constexpr int64_t B = 4, T = 16, D = 128, H = 4, Dh = 32, F = 512, V = 64, L = 2;
  constexpr int kPerLayer = 12;  // ln1 g,b; wq wk wv wo; ln2 g,b; w1 b1 w2 b2
  auto layer_norm = [](const Tensor& x, const Tensor& g, const Tensor& b) {
    auto mu = trace::mean(x, {-1}, true);
    auto xc = x - mu;
    auto var = trace::mean(xc * xc, {-1}, true);
    return xc * trace::rsqrt(var + 1e-5) * g + b;
  };
  auto loss = [&](std::span<const Tensor> a) -> std::vector<Tensor> {
    // a: tokens s32 [B,T], targets f32 [B*T,V], emb [V,D], pos [T,D], layers..., lnf g,b
    Tensor x = trace::take_rows(a[2], a[0]) + a[3];  // [B,T,D]
    std::vector<double> mask(size_t(T * T));
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) mask[size_t(i * T + j)] = j <= i;
    Tensor causal = trace::constant(Array::from_doubles(DType::i1, {T, T}, mask));
    for (int l = 0; l < L; ++l) {
      const Tensor* p = &a[size_t(4 + l * kPerLayer)];
      auto heads = [&](const Tensor& t) {
        return trace::transpose(trace::reshape(t, {B, T, H, Dh}), {0, 2, 1, 3});
      };
      Tensor h = layer_norm(x, p[0], p[1]);
      Tensor q = heads(trace::matmul(h, trace::transpose(p[2])));
      Tensor k = heads(trace::matmul(h, trace::transpose(p[3])));
      Tensor v = heads(trace::matmul(h, trace::transpose(p[4])));
      Tensor att =
          trace::matmul(q, trace::transpose(k, {0, 1, 3, 2})) * (1.0 / std::sqrt(double(Dh)));
      att = trace::softmax(trace::where(causal, att, trace::full_like(att, -1e9)), -1);
      Tensor o = trace::reshape(trace::transpose(trace::matmul(att, v), {0, 2, 1, 3}), {B, T, D});
      x = x + trace::matmul(o, trace::transpose(p[5]));
      h = layer_norm(x, p[6], p[7]);
      h = composites::gelu(trace::matmul(h, trace::transpose(p[8])) + p[9]);
      x = x + trace::matmul(h, trace::transpose(p[10])) + p[11];
    }
    const Tensor* f = &a[size_t(4 + L * kPerLayer)];
    Tensor logits = trace::reshape(trace::matmul(layer_norm(x, f[0], f[1]), trace::transpose(a[2])),
                                   {B * T, V});
    return {-trace::mean(trace::sum(a[1] * trace::log_softmax(logits), {1}))};
  };
  std::vector<ir::TensorType> types = {
      {DType::s32, {B, T}}, {DType::f32, {B * T, V}}, {DType::f32, {V, D}}, {DType::f32, {T, D}}};
  for (int l = 0; l < L; ++l) {
    for (Shape s : {Shape{D}, Shape{D}, Shape{D, D}, Shape{D, D}, Shape{D, D}, Shape{D, D},
                    Shape{D}, Shape{D}, Shape{F, D}, Shape{F}, Shape{D, F}, Shape{D}})
      types.push_back({DType::f32, s});
  }
  types.push_back({DType::f32, {D}});
  types.push_back({DType::f32, {D}});
  auto s = make_step(loss, types, 2, optim::AdamW{}, int(st.range(0)));
  std::vector<int32_t> tok(size_t(B * T));
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = int32_t((i * 7 + 3) % V);
  s.in[0] = Array::from({B, T}, tok);
  for (auto _ : st) s.run();
  st.SetLabel(fmt::format("{} threads, {} IR nodes", st.range(0), s.ts.fn.nodes.size()));
}
BENCHMARK(BM_TransformerStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->MinTime(1.0);

// --- pooling (reduce_window / select_and_scatter) --------------------------------------------
// Max pooling forward and backward on the Fashion-MNIST CNN's shapes: [128, 32, 28, 28] 2x2
// stride 2 (arg 0) and [128, 64, 14, 14] 3x3 stride 2 padding 1 (arg 1); threads: arg 2.
void BM_MaxPool(benchmark::State& st) {
  const bool big = st.range(0) == 0;
  const Shape xs = big ? Shape{128, 32, 28, 28} : Shape{128, 64, 14, 14};
  const std::vector<int64_t> w{1, 1, big ? 2 : 3, big ? 2 : 3}, s{1, 1, 2, 2};
  const std::vector<int64_t> pad{0, 0, big ? 0 : 1, big ? 0 : 1};
  ir::Builder b;
  ir::ValueId x = b.parameter({DType::f32, xs});
  ir::ValueId y = b.reduce_window(x, ir::ReduceKind::max, w, s, pad, pad);
  ir::ValueId g = b.select_and_scatter(x, y, ir::Comparison::GE, w, s, pad, pad);
  // Full sums out, so y and g live in the run's reused arena (fresh output arrays would time
  // the kernel's page faults).
  auto exe = runtime::host::compile(b.build({b.reduce(y, ir::ReduceKind::sum, {0, 1, 2, 3}),
                                             b.reduce(g, ir::ReduceKind::sum, {0, 1, 2, 3})}),
                                    {.num_threads = int(st.range(1))});
  std::vector<Array> in{pseudo(DType::f32, xs, 1.0, 3)};
  for (auto _ : st) benchmark::DoNotOptimize(exe->run(in));
  st.counters["MB_in"] = double(xs.numel() * 4) / 1e6;
}
BENCHMARK(BM_MaxPool)
    ->Args({0, 1})
    ->Args({0, 2})
    ->Args({1, 1})
    ->Args({1, 2})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

}  // namespace

int main(int argc, char** argv) {
  bool table = true;  // skipped when a filter selects other benchmarks
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.starts_with("--benchmark_filter=") && a.find("Chain") == std::string::npos) table = false;
  }
  if (table) dispatch_table();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// Cost of the gradient transform and of the code it generates, on a deep tanh MLP:
// * BM_ValueAndGrad / BM_Simplify: transform time vs depth (counters: IR sizes);
// * BM_RunForward / BM_RunValueAndGrad: host-lane step time; reverse mode should cost a small
//   constant factor (about 2-3x) of the forward pass.
#include <benchmark/benchmark.h>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/tensor.h"

using namespace tlaloc;
using trace::Tensor;

namespace {

// (x [batch, width], w0, b0, ..., w{L-1}, b{L-1}) -> mean(square(mlp(x))).
ir::Function mlp(int layers, int64_t batch, int64_t width) {
  std::vector<ir::TensorType> types{{DType::f32, {batch, width}}};
  for (int l = 0; l < layers; ++l) {
    types.push_back({DType::f32, {width, width}});
    types.push_back({DType::f32, {width}});
  }
  return trace::capture(
      [layers](std::span<const Tensor> a) {
        Tensor h = a[0];
        for (int l = 0; l < layers; ++l)
          h = trace::tanh(trace::matmul(h, a[size_t(1 + 2 * l)]) + a[size_t(2 + 2 * l)]);
        return std::vector<Tensor>{trace::mean(trace::square(h))};
      },
      types);
}

std::vector<int> params(int layers) {
  std::vector<int> w;
  for (int i = 1; i <= 2 * layers; ++i) w.push_back(i);
  return w;
}

void BM_ValueAndGrad(benchmark::State& state) {
  int layers = int(state.range(0));
  ir::Function f = mlp(layers, 8, 16);
  ir::Function g;
  for (auto _ : state) {
    g = autodiff::value_and_grad(f, params(layers));
    benchmark::DoNotOptimize(g.nodes.data());
  }
  state.counters["forward_ops"] = double(f.num_ops());
  state.counters["grad_ops"] = double(g.num_ops());
}
BENCHMARK(BM_ValueAndGrad)->Arg(4)->Arg(32)->Arg(256)->Unit(benchmark::kMicrosecond);

void BM_Simplify(benchmark::State& state) {
  int layers = int(state.range(0));
  ir::Function g = autodiff::value_and_grad(mlp(layers, 8, 16), params(layers));
  ir::Function s;
  for (auto _ : state) {
    s = passes::simplify(g);
    benchmark::DoNotOptimize(s.nodes.data());
  }
  state.counters["ops_before"] = double(g.num_ops());
  state.counters["ops_after"] = double(s.num_ops());
}
BENCHMARK(BM_Simplify)->Arg(4)->Arg(32)->Arg(256)->Unit(benchmark::kMicrosecond);

std::vector<Array> mlp_inputs(const ir::Function& f) {
  std::vector<Array> in;
  for (int i = 0; i < f.num_inputs(); ++i)
    in.push_back(Array::filled(DType::f32, f.input_type(i).shape, 0.01 * (i % 7 + 1)));
  return in;
}

void run_bench(benchmark::State& state, const ir::Function& f) {
  auto exe = runtime::host::compile(f);
  std::vector<Array> in = mlp_inputs(f);
  for (auto _ : state) benchmark::DoNotOptimize(exe->run(in));
}

void BM_RunForward(benchmark::State& state) {
  run_bench(state, passes::simplify(mlp(4, 256, 256)));
}
BENCHMARK(BM_RunForward)->Unit(benchmark::kMicrosecond);

void BM_RunValueAndGrad(benchmark::State& state) {
  run_bench(state, passes::simplify(autodiff::value_and_grad(mlp(4, 256, 256), params(4))));
}
BENCHMARK(BM_RunValueAndGrad)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();

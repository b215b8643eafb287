// The host lane's convolution kernel at the Fashion-MNIST CNN's sizes (batch 128): forward, input
// gradient and kernel gradient convolutions, each as autodiff derives it, timed alone; prints
// one line per case, "RESULT case=... pass=... ms=... gflops=..." (2 * multiply-adds / time,
// median of the runs). Usage: bench_conv [THREADS] [RUNS] (default 1 thread, 20 runs);
// bench/run_conv_bench.sh compares it with PyTorch (bench/conv_torch.py).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "tlaloc/autodiff/autodiff.h"
#include "tlaloc/passes/passes.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/trace/conv.h"

using namespace tlaloc;
using trace::Tensor;

namespace {

struct Case {
  const char* name;
  int64_t n, c, o, h, k, pad;
};

Array ramp(const Shape& s, double scale) {
  std::vector<double> v(size_t(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * double(int64_t(i % 17) - 8) / 8.0;
  return Array::from_doubles(DType::f32, s, v);
}

double median_ms(runtime::Executable& e, const std::vector<Array>& in, int runs) {
  e.run(in);  // warm-up
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    e.run(in);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 20;
  const Case cases[] = {{"conv1_1x32_5x5_28", 128, 1, 32, 28, 5, 2},
                        {"conv2_32x64_5x5_14", 128, 32, 64, 14, 5, 2},
                        {"conv2_32x64_3x3_14", 128, 32, 64, 14, 3, 1}};
  runtime::host::Options opt;
  opt.num_threads = threads;
  for (const Case& c : cases) {
    const Shape xs{c.n, c.c, c.h, c.h}, ws{c.o, c.c, c.k, c.k}, ys{c.n, c.o, c.h, c.h};
    const double flops = 2.0 * double(c.n * c.o * c.h * c.h) * double(c.c * c.k * c.k);
    ir::Function f = trace::capture(
        [&](std::span<const Tensor> in) {
          return std::vector<Tensor>{trace::conv2d(in[0], in[1], 1, c.pad)};
        },
        {{DType::f32, xs}, {DType::f32, ws}});
    const Array x = ramp(xs, 1), w = ramp(ws, 0.1), ct = ramp(ys, 0.01);
    struct Pass {
      const char* name;
      ir::Function fn;
      std::vector<Array> in;
    };
    std::vector<Pass> passes{{"forward", f, {x, w}},
                             {"input_grad", passes::simplify(autodiff::vjp(f, {0})), {x, w, ct}},
                             {"kernel_grad", passes::simplify(autodiff::vjp(f, {1})), {x, w, ct}}};
    for (Pass& p : passes) {
      if (c.c == 1 && std::string(p.name) == "input_grad") continue;  // the image: no gradient
      auto e = runtime::host::compile(p.fn, opt);
      const double ms = median_ms(*e, p.in, runs);
      fmt::print("RESULT case={} pass={} threads={} ms={:.3f} gflops={:.1f}\n", c.name, p.name,
                 threads, ms, flops / ms * 1e-6);
    }
  }
}

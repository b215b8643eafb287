// Host random draws: the per-epoch dataset shuffle (permutation of 60000) and bulk draws for
// initialisation.
#include <benchmark/benchmark.h>

#include "tlaloc/random/initializers.h"

using namespace tlaloc::random;

static void BM_Permutation60000(benchmark::State& state) {
  const Mode m = state.range(0) ? Mode::legacy : Mode::partitionable;
  uint32_t epoch = 0;
  for (auto _ : state)
    benchmark::DoNotOptimize(permutation_indices(fold_in(key(0), epoch++), 60000, m));
}
BENCHMARK(BM_Permutation60000)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

static void BM_Bits(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(bits(key(1), {state.range(0)}));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Bits)->Arg(1 << 20);

static void BM_Uniform(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(uniform(key(1), {state.range(0)}));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Uniform)->Arg(1 << 20);

static void BM_Normal(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(normal(key(1), {state.range(0)}));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Normal)->Arg(1 << 20);

static void BM_GlorotUniform(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(glorot_uniform(key(1), {1024, 1024}));
}
BENCHMARK(BM_GlorotUniform)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();

// tlaloc bench step: the three-lane table of the seed case study (train/step_bench.h) on the
// disc demo's step or the benchmark LM (--model lm): (a) host lane, (b) pjrt with gradients
// downloaded and AdamW on the host, (c) pjrt with the optimizer in the program.
#include <fmt/format.h>
#include <sys/resource.h>

#include "apps/tlaloc/commands.h"
#include "tlaloc/random/random.h"
#include "tlaloc/runtime/pjrt/client.h"
#include "tlaloc/train/disc.h"
#include "tlaloc/train/lm.h"
#include "tlaloc/train/step_bench.h"

namespace tlaloc::app {
namespace {

struct BenchOptions {
  int64_t steps = 300, warmup = 30;
  int threads = 0;
  std::string model = "disc";
  std::string lane = "auto";
};

train::StepBenchCase disc_case(int threads) {
  using namespace tlaloc::train;
  StepBenchCase c;
  auto keys = random::split(random::key(20260921), 3);
  c.title = "disc demo step (MLP 2-16-16-1, 512 points full batch, Adam lr 0.02 in the program)";
  c.make_model = [k = keys[1]] {
    auto m = disc::make_model();
    m->init(k);
    return std::shared_ptr<nn::Module>(m);
  };
  c.loss = disc::mse_loss_fn();
  c.data = disc::data_inputs(512);
  disc::Data d = disc::make_data(keys[0], 512);
  c.resident = {d.x, d.y};
  c.per_step = [](int64_t) { return std::vector<Array>{}; };
  c.opt = optim::Adam{.lr = 0.02};
  c.num_threads = threads;
  return c;
}

// The benchmark LM (train/lm.h): 2 layers, d_model 128, 4 heads, MLP 512 GELU, ctx 16, batch
// 4x16, AdamW lr 3e-3 wd 0.01 in the program; 4096 resident random bytes, window starts per step.
train::StepBenchCase lm_case(int threads) {
  using namespace tlaloc::train;
  StepBenchCase c;
  const int64_t n = 4096, ctx = lm::bench_config().context;
  c.title = fmt::format(
      "benchmark LM step (2 layers, d_model 128, 4 heads, MLP 512 GELU, ctx 16, batch 4x16, "
      "AdamW in the program; {} parameters)",
      nn::CausalLM(lm::bench_config()).num_parameters());
  c.make_model = [] {
    auto m = std::make_shared<nn::CausalLM>(lm::bench_config());
    m->init(random::key(20260921));
    return std::shared_ptr<nn::Module>(m);
  };
  c.loss = lm::loss_fn(ctx);
  c.data = lm::data_inputs(n, lm::kBenchBatch);
  c.resident = {random::randint(random::key(7), Shape{n}, 0, 256)};
  c.per_step = [n, ctx](int64_t s) {
    return std::vector<Array>{lm::random_starts(1, s, lm::kBenchBatch, n, ctx)};
  };
  c.opt = lm::bench_optimizer();
  c.num_threads = threads;
  return c;
}

void run_bench_step(const BenchOptions& o) {
  using namespace tlaloc::train;
  if (o.model != "disc" && o.model != "lm")
    fail("bench step: --model must be disc or lm, got '{}'", o.model);
  StepBenchCase c = o.model == "lm" ? lm_case(o.threads) : disc_case(o.threads);
  Lane requested = parse_lane(o.lane);
  std::string reason;
  if (requested != Lane::host) {
    LaneChoice choice = choose_lane(requested);
    fmt::print("{}\n", choice.line);
    if (choice.lane != Lane::pjrt) reason = runtime::pjrt::probe().reason;
  }
  fmt::print(
      "{}\ntimes of one whole train step (forward, gradient, optimizer update, inputs in and "
      "outputs out), {} timed steps after {} warm-up steps\n",
      c.title, o.steps, o.warmup);
  std::vector<LaneTiming> lanes{bench_host_lane(c, o.steps, o.warmup)};
  if (requested == Lane::host) {
    lanes.push_back(skipped_lane('b', "--lane host"));
    lanes.push_back(skipped_lane('c', "--lane host"));
  } else if (!reason.empty()) {
    lanes.push_back(skipped_lane('b', "pjrt unavailable: " + reason));
    lanes.push_back(skipped_lane('c', "pjrt unavailable: " + reason));
  } else {
    auto& client = runtime::pjrt::default_client();
    lanes.push_back(bench_pjrt_host_optimizer(c, client, o.steps, o.warmup));
    lanes.push_back(bench_pjrt_in_program(c, client, o.steps, o.warmup));
  }
  fmt::print("{}", lane_table(lanes));
  // ru_maxrss is in KiB on Linux (getrusage(2)).
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  fmt::print(
      "peak resident memory of this process: {:.1f} MiB\nRESULT tlaloc peak_rss_mib={:.1f}\n",
      ru.ru_maxrss / 1024.0, ru.ru_maxrss / 1024.0);
}

}  // namespace

void register_bench(CLI::App& app) {
  static BenchOptions o;
  auto* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  auto* step = bench->add_subcommand("step",
                                     "step time on the three lanes (host, pjrt+host "
                                     "AdamW, pjrt with AdamW in the program)");
  step->add_option("--model", o.model, "the step to time: disc|lm")->capture_default_str();
  step->add_option("--steps", o.steps, "timed steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  step->add_option("--warmup", o.warmup, "untimed steps first (at least 10: losses compared)")
      ->capture_default_str();
  step->add_option("--threads", o.threads, "host threads (0: OpenMP default)")
      ->capture_default_str();
  step->add_option("--lane", o.lane, "host: lane (a) only; pjrt|auto: all three (env TLALOC_LANE)")
      ->envname("TLALOC_LANE")
      ->capture_default_str();
  step->callback([] { run_bench_step(o); });
}

}  // namespace tlaloc::app

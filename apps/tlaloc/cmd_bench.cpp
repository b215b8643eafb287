// tlaloc bench step: the three-lane table of the seed case study (train/step_bench.h) on the
// disc demo's step, the benchmark LM (--model lm) or a Llama preset's step (--model llama
// --preset P, the LlamaDecoder matrix); the cases are the recipes' bench_case():
// (a) host lane, (b) pjrt with gradients downloaded and AdamW on the host, (c) pjrt with the
// optimizer in the program, timed in latency and / or throughput mode (--mode).
#include <fmt/format.h>
#include <sys/resource.h>

#include "apps/tlaloc/cli_numbers.h"
#include "apps/tlaloc/commands.h"
#include "tlaloc/recipes/disc.h"
#include "tlaloc/recipes/llama_bench.h"
#include "tlaloc/recipes/lm.h"
#include "tlaloc/runtime/pjrt/client.h"
#include "tlaloc/train/step_bench.h"

namespace tlaloc::app {
namespace {

struct BenchOptions {
  int64_t steps = 300, warmup = 30;
  std::string mode = "both";  // lane (c): latency|throughput|both
  int64_t repeats = train::kThroughputRepeats;
  int threads = 0;
  std::string model = "disc";
  std::string preset = "small";  // --model llama
  std::string lane = "auto";
  bool lora = false;  // --model llama: LoRA r 8, alpha 16 on q_proj, v_proj (PEFT's defaults)
  std::string precision = "f32";
  std::string flat_state = "auto";  // auto|on|off
};

void run_bench_step(const BenchOptions& o) {
  using namespace tlaloc::train;
  if (o.model != "disc" && o.model != "lm" && o.model != "llama")
    fail("bench step: --model must be disc, lm or llama, got '{}'", o.model);
  if (o.lora && o.model != "llama") fail("bench step: --lora needs --model llama");
  if (o.flat_state != "auto" && o.flat_state != "on" && o.flat_state != "off")
    fail("bench step: --flat-state must be auto, on or off, got '{}'", o.flat_state);
  StepBenchCase c =
      o.model == "lm" ? recipes::lm::bench_case(o.threads)
      : o.model == "llama"
          ? recipes::llama::bench_case(
                recipes::llama::preset(o.preset), o.threads,
                o.lora ? std::optional(nn::LoraConfig{.lora_alpha = 16}) : std::nullopt)
          : recipes::disc::bench_case(o.threads);
  if (o.precision != "f32" && o.precision != "bf16" && o.precision != "f16")
    fail("bench step: --precision must be f32, bf16 or f16, got '{}'", o.precision);
  c.precision = dtype_from_name(o.precision);
  if (o.flat_state != "auto") {
    c.flat_state = o.flat_state == "on";
    c.title += fmt::format(", --flat-state {}", o.flat_state);
  }
  const StepBenchMode mode = parse_step_bench_mode(o.mode);
  if (c.precision != DType::f32) c.title += fmt::format(", --precision {}", o.precision);
  Lane requested = parse_lane(o.lane);
  std::string reason;
  if (requested != Lane::host) {
    LaneChoice choice = choose_lane(requested);
    fmt::print("{}\n", choice.line);
    if (choice.lane != Lane::pjrt) reason = runtime::pjrt::probe().reason;
  }
  fmt::print(
      "{}\ntimes of one whole train step (forward, gradient, optimizer update, inputs in and "
      "outputs out), {} timed steps after {} warm-up steps{}\n",
      c.title, o.steps, std::max<int64_t>(o.warmup, train::kLossSteps),
      !reason.empty() || requested == Lane::host || mode == StepBenchMode::latency
          ? ""
          : fmt::format("; lane (c) throughput: {} runs of {} steps", o.repeats, o.steps));
  std::vector<LaneTiming> lanes{bench_host_lane(c, o.steps, o.warmup)};
  if (requested == Lane::host) {
    lanes.push_back(skipped_lane('b', "--lane host"));
    lanes.push_back(skipped_lane('c', "--lane host"));
  } else if (!reason.empty()) {
    lanes.push_back(skipped_lane('b', "pjrt unavailable: " + reason));
    lanes.push_back(skipped_lane('c', "pjrt unavailable: " + reason));
  } else {
    auto& client = runtime::pjrt::default_client();
    // Lane (b) applies AdamW on the host to every parameter; with frozen ones it has no meaning.
    lanes.push_back(o.lora ? skipped_lane('b', "--lora (frozen base weights)")
                    : c.precision == DType::f16
                        ? skipped_lane('b', "--precision f16 (loss scaling is in the program)")
                        : bench_pjrt_host_optimizer(c, client, o.steps, o.warmup));
    lanes.push_back(bench_pjrt_in_program(c, client, o.steps, o.warmup, mode, o.repeats));
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
  step->add_option("--model", o.model, "the step to time: disc|lm|llama")->capture_default_str();
  step->add_option("--preset", o.preset, "--model llama: tiny|small|medium")->capture_default_str();
  step->add_flag("--lora", o.lora,
                 "--model llama: LoRA fine-tuning (r 8, alpha 16 on q_proj, v_proj; base frozen)");
  step->add_option("--steps", o.steps, "timed steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  step->add_option("--warmup", o.warmup,
                   "untimed steps first (raised to 10 if smaller: the first 10 losses are compared "
                   "across lanes)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  step->add_option("--mode", o.mode,
                   "lane (c): latency (each step waited for), throughput (--repeats runs of "
                   "--steps steps in flight, one wait each) or both")
      ->capture_default_str();
  step->add_option("--repeats", o.repeats, "lane (c) throughput: runs of --steps steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  step->add_option("--precision", o.precision, "compute type of matmuls: f32|bf16|f16")
      ->capture_default_str();
  step->add_option("--flat-state", o.flat_state,
                   "optimizer state in one tensor per group and moment: auto (pjrt lane on, host "
                   "lane off), on or off")
      ->capture_default_str();
  step->add_option("--threads", o.threads, "host threads (0: OpenMP default)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxThreads));
  step->add_option("--lane", o.lane, "host: lane (a) only; pjrt|auto: all three (env TLALOC_LANE)")
      ->envname("TLALOC_LANE")
      ->capture_default_str();
  step->callback([] { run_bench_step(o); });
}

}  // namespace tlaloc::app

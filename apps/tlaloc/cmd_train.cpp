// tlaloc train RECIPE: registers the recipes (disc, ...) and their shared options.
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include "apps/tlaloc/cli_numbers.h"
#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/core/error.h"
#include "tlaloc/runtime/host/compile.h"
#include "tlaloc/runtime/pjrt/client.h"

namespace tlaloc::app {

void add_adamw_options(CLI::App* cmd, double& lr, double& wd) {
  cmd->add_option("--lr", lr, "AdamW learning rate")
      ->capture_default_str()
      ->check(finite_non_negative());
  cmd->add_option("--wd", wd, "AdamW weight decay (decoupled)")
      ->capture_default_str()
      ->check(finite_non_negative());
}

void add_common_options(CLI::App* cmd, CommonTrainOptions& o) {
  cmd->add_option("--seed", o.seed, "seed of every random draw (data, init, shuffles)")
      ->capture_default_str();
  cmd->add_option("--log-every", o.log_every, "read and print the loss every N steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--threads", o.threads, "host threads (0: OMP_NUM_THREADS or all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--schedule", o.schedule, "lr schedule: constant|cosine|warmup-cosine|step")
      ->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "linear warm-up steps")->capture_default_str();
  cmd->add_option("--lane", o.lane, "where the step runs: host|pjrt|auto (env TLALOC_LANE)")
      ->envname("TLALOC_LANE")
      ->capture_default_str();
  cmd->add_option("--precision", o.precision,
                  "pjrt lane f32 dots: default (XLA may use TF32) | highest (full f32)")
      ->capture_default_str();
  cmd->add_flag("--deterministic", o.deterministic,
                "pjrt lane: XLA's deterministic ops (xla_gpu_deterministic_ops)");
}

optim::Schedule resolve_common(const CommonTrainOptions& o, int64_t total_steps) {
  if (o.lane != "host" && o.lane != "auto" && o.lane != "pjrt")
    fail("--lane must be host, pjrt or auto, got '{}'", o.lane);
  if (o.precision != "default" && o.precision != "highest")
    fail("--precision must be default or highest, got '{}'", o.precision);
  return optim::parse_schedule(o.schedule, total_steps, o.warmup);
}

namespace {
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) {
  if (g_interrupted) _exit(130);
  g_interrupted = 1;
}
}  // namespace

io::Checkpoint load_resume(const std::string& path, const std::map<std::string, std::string>& user,
                           uint64_t seed) {
  io::Checkpoint c = io::load_checkpoint(path);
  // The recipe first: another recipe's checkpoint differs in every field, name the real cause.
  if (auto r = user.find("recipe"); r != user.end()) {
    auto have = c.user.find("recipe");
    if (have == c.user.end())
      fail("--resume {}: not a checkpoint of `tlaloc train {}` (it has no recipe metadata)", path,
           r->second);
    if (have->second != r->second)
      fail("--resume {}: it is a `tlaloc train {}` checkpoint, this is `tlaloc train {}`", path,
           have->second, r->second);
  }
  for (const auto& [k, v] : user)
    if (c.user.count(k) && c.user.at(k) != v)
      fail("--resume {}: it was trained with {}={}, this run has {}", path, k, c.user.at(k), v);
  if (c.seed && *c.seed != seed)
    fail("--resume {}: it was trained with --seed {}, this run has {}", path, *c.seed, seed);
  return c;
}

void install_interrupt_handler() {
  g_interrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

bool interrupted() { return g_interrupted != 0; }

void apply_lane(const CommonTrainOptions& o, train::TrainerOptions& t) {
  train::LaneChoice c = train::choose_lane(train::parse_lane(o.lane));
  fmt::print("{}\n", c.line);
  t.lane = c.lane;
  if (o.precision == "highest") t.pjrt.emit.precision = stablehlo::Precision::HIGHEST;
  if (o.deterministic) t.pjrt.compile.overrides.push_back({"xla_gpu_deterministic_ops", true});
}

int64_t compiled_executables(train::Lane lane) {
  int64_t n = runtime::host::compile_count();
  if (lane == train::Lane::pjrt) n += int64_t(runtime::pjrt::default_client().cache_size());
  return n;
}

void print_cross_check(train::Trainer& t, std::vector<Array> inputs) {
  if (t.lane() != train::Lane::pjrt) return;
  train::CrossCheck c = t.cross_check(std::move(inputs));
  fmt::print(
      "cross-check (one step, host lane vs pjrt lane): max |diff| {:.3e}, relative {:.3e}{}\n",
      c.max_abs, c.max_rel, c.worst.empty() ? "" : fmt::format(" (largest in {})", c.worst));
}

void register_train(CLI::App& app) {
  auto* train = app.add_subcommand("train", "train a model (recipes: disc, fmnist, lm)");
  train->require_subcommand(1);
  register_train_disc(*train);
  register_train_fmnist(*train);
  register_train_lm(*train);
}

}  // namespace tlaloc::app

// tlaloc train RECIPE: registers the recipes (disc, fmnist, lm, llama) and their shared options.
#include "apps/tlaloc/cli_numbers.h"
#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/core/error.h"
#include "tlaloc/stablehlo/emit.h"

namespace tlaloc::app {

void add_adamw_options(CLI::App* cmd, double& lr, double& wd) {
  cmd->add_option("--lr", lr, "AdamW learning rate")
      ->capture_default_str()
      ->check(finite_non_negative());
  cmd->add_option("--wd", wd, "AdamW weight decay (decoupled)")
      ->capture_default_str()
      ->check(finite_non_negative());
}

void add_common_options(CLI::App* cmd, CommonTrainFlags& f, recipes::Common& c) {
  cmd->add_option("--seed", c.seed, "seed of every random draw (data, init, shuffles)")
      ->capture_default_str();
  cmd->add_option("--log-every", c.log_every, "read and print the loss every N steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd->add_option("--threads", c.threads, "host threads (0: OMP_NUM_THREADS or all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxThreads));
  cmd->add_option("--schedule", c.schedule, "lr schedule: constant|cosine|warmup-cosine|step")
      ->capture_default_str();
  cmd->add_option("--warmup", c.warmup, "linear warm-up steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), kMaxSteps));
  cmd->add_option("--lane", f.lane, "where the step runs: host|pjrt|auto (env TLALOC_LANE)")
      ->envname("TLALOC_LANE")
      ->capture_default_str();
  cmd->add_option("--precision", f.precision,
                  "compute type of matmuls: f32 | bf16 (f32 accumulation, f32 "
                  "master weights) | f16 (the same, with dynamic loss scaling)")
      ->capture_default_str();
  cmd->add_option(
         "--matmul-precision", f.matmul_precision,
         "pjrt lane f32 dots: default (XLA may use TF32) | high (bf16_3x) | highest (full f32)")
      ->capture_default_str();
  cmd->add_option("--cross-check", f.cross_check,
                  "pjrt lane: gradients and update compared with the host lane's before "
                  "training: off | warn (a failure is a warning) | require (an error)")
      ->capture_default_str();
  cmd->add_option("--flat-state", f.flat_state,
                  "optimizer state in one tensor per parameter group and moment, one update op "
                  "each: auto (pjrt lane on, host lane off) | on | off (one per parameter)")
      ->capture_default_str();
  cmd->add_option("--minutes", c.minutes,
                  "time budget: after M minutes of training, report, save and stop (0: none)")
      ->check(finite_non_negative());
  cmd->add_flag("--deterministic", c.deterministic,
                "pjrt lane: XLA's deterministic ops (xla_gpu_deterministic_ops)");
  cmd->add_option("--zero", c.zero,
                  "under mpirun: ZeRO stage 1 shards the optimizer state over the processes")
      ->capture_default_str()
      ->check(CLI::Range(0, 1));
}

void add_checkpoint_options(CLI::App* cmd, CommonTrainFlags& f, recipes::Common& c,
                            const std::string& default_save) {
  f.save = default_save;
  f.save_by_default = !default_save.empty();
  f.save_option =
      cmd->add_option("--save", f.save,
                      f.save_by_default ? "checkpoint path (safetensors)"
                                        : "save a checkpoint (safetensors) at the end, every "
                                          "--save-every steps and on Ctrl-C");
  if (f.save_by_default) f.save_option->capture_default_str();
  cmd->add_option("--save-every", c.save_every, "also save every N steps (0: only at the end)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), kMaxSteps));
  cmd->add_option("--stop-after", c.stop_after, "save and stop after N steps in all")
      ->check(CLI::Range(int64_t(1), kMaxSteps));
  f.resume_option = cmd->add_option("--resume", f.resume, "continue from this checkpoint");
  cmd->add_option("--metrics", c.metrics, "append per-step and per-epoch metrics to this CSV");
  cmd->add_option("--plot", c.plot,
                  "write the training curves (PNG) here at every save and at the end");
  f.command = cmd;
}

void refuse_empty_outputs(const CLI::App* cmd, std::initializer_list<const char*> flags) {
  for (const char* flag : flags) {
    const CLI::Option* o = cmd->get_option_no_throw(flag);
    if (!o || o->count() == 0 || !o->results().back().empty()) continue;
    const CLI::App* parent = cmd->get_parent();  // "train disc: ...", "eval: ..."
    const std::string what = parent && parent->get_parent()
                                 ? parent->get_name() + " " + cmd->get_name()
                                 : cmd->get_name();
    fail("{}: {} is empty (an unset variable?); omit it to write no picture", what, flag);
  }
}

void resolve(const CommonTrainFlags& f, recipes::Common& c) {
  if (f.lane != "host" && f.lane != "auto" && f.lane != "pjrt")
    fail("--lane must be host, pjrt or auto, got '{}'", f.lane);
  if (f.precision != "f32" && f.precision != "bf16" && f.precision != "f16")
    fail(
        "--precision must be f32, bf16 or f16, got '{}' (the pjrt lane's f32 dot precision is "
        "--matmul-precision default|high|highest)",
        f.precision);
  if (f.flat_state != "auto" && f.flat_state != "on" && f.flat_state != "off")
    fail("--flat-state must be auto, on or off, got '{}'", f.flat_state);
  if (f.command) refuse_empty_outputs(f.command, {"--plot", "--confusion", "--boundary"});
  c.lane = train::parse_lane(f.lane);
  c.precision = dtype_from_name(f.precision);
  c.matmul_precision = stablehlo::parse_precision(f.matmul_precision);
  c.cross_check = train::parse_cross_check_mode(f.cross_check);
  c.flat_state.reset();
  if (f.flat_state != "auto") c.flat_state = f.flat_state == "on";
  c.save.reset();
  if (f.save_by_default || (f.save_option && f.save_option->count() > 0)) c.save = f.save;
  c.resume.reset();
  if (f.resume_option && f.resume_option->count() > 0) c.resume = f.resume;
}

void set_exit_status(const train::FitResult& r) {
  if (r.interrupted) set_exit_status(130);  // the shell's status of a run stopped by Ctrl-C
}

void register_train(CLI::App& app) {
  auto* train = app.add_subcommand("train", "train a model (recipes: disc, fmnist, lm, llama)");
  train->require_subcommand(1);
  register_train_disc(*train);
  register_train_fmnist(*train);
  register_train_lm(*train);
  register_train_llama(*train);
}

}  // namespace tlaloc::app

// Options shared by every `tlaloc train` recipe.
#pragma once

#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/optim/schedule.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::app {

struct CommonTrainOptions {
  uint64_t seed = 20260921;
  int log_every = 50;
  int threads = 0;
  std::string schedule = "constant";
  int64_t warmup = 0;
  std::string lane = "host";
  std::string precision = "default";  // pjrt lane dots: default (TF32 allowed) | highest
  bool deterministic = false;         // pjrt lane: XLA's xla_gpu_deterministic_ops
};

// Adds --seed --log-every --threads --schedule --warmup --lane --precision --deterministic.
void add_common_options(CLI::App* cmd, CommonTrainOptions& o);
// --lr and --wd of a recipe trained with AdamW (finite numbers >= 0, checked by the parser).
void add_adamw_options(CLI::App* cmd, double& lr, double& wd);
// Validates --lane / --precision and returns the schedule for `total_steps`.
optim::Schedule resolve_common(const CommonTrainOptions& o, int64_t total_steps);
// Resolves --lane (auto: pjrt if a plugin and a device are found) and prints which lane and
// why in one line; sets t.lane and the pjrt options (--precision, --deterministic). Throws
// tlaloc::Error with that one line when --lane pjrt cannot start.
void apply_lane(const CommonTrainOptions& o, train::TrainerOptions& t);
// Executables compiled so far on `lane` (host compiles, plus the pjrt client's cache).
int64_t compiled_executables(train::Lane lane);
// pjrt lane: one step of both lanes from the trainer's state (train::Trainer::cross_check),
// printed as max |diff| and relative difference. Does nothing on the host lane.
void print_cross_check(train::Trainer& t, std::vector<Array> inputs);

// --resume: loads `path` and checks that its recipe metadata (`user` keys it has) and its seed
// equal this run's; throws tlaloc::Error naming the recipe when it differs (or is missing), else
// the first field that differs.
io::Checkpoint load_resume(const std::string& path, const std::map<std::string, std::string>& user,
                           uint64_t seed);

// Ctrl-C (SIGINT) during training: the first one sets a flag that the training loop checks
// after each step (it then saves a checkpoint and stops); a second one exits at once.
void install_interrupt_handler();
bool interrupted();

}  // namespace tlaloc::app

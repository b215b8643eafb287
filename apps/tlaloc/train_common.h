// Options shared by every `tlaloc train` recipe.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "tlaloc/optim/schedule.h"

namespace tlaloc::app {

struct CommonTrainOptions {
  uint64_t seed = 20260921;
  int log_every = 50;
  int threads = 0;
  std::string schedule = "constant";
  int64_t warmup = 0;
  std::string lane = "host";
};

// Adds --seed --log-every --threads --schedule --warmup --lane to `cmd`.
void add_common_options(CLI::App* cmd, CommonTrainOptions& o);
// Validates --lane (host only on this build) and returns the schedule for `total_steps`.
optim::Schedule resolve_common(const CommonTrainOptions& o, int64_t total_steps);

// Ctrl-C (SIGINT) during training: the first one sets a flag that the training loop checks
// after each step (it then saves a checkpoint and stops); a second one exits at once.
void install_interrupt_handler();
bool interrupted();

}  // namespace tlaloc::app

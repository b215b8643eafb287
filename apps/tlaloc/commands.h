// Subcommands of the `tlaloc` command. Each lives in its own cmd_*.cpp and registers itself on
// the root CLI::App; main.cpp calls every register_* below.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "tlaloc/ir/ir.h"

namespace tlaloc::app {

// A new command: declare its register_* here, define it in cmd_<name>.cpp, call it in main.cpp.
void register_train(CLI::App& app);     // tlaloc train disc|fmnist|lm|llama
void register_export(CLI::App& app);    // tlaloc export RECIPE: the train step as StableHLO
void register_inspect(CLI::App& app);   // tlaloc inspect FILE: a safetensors listing
void register_bench(CLI::App& app);     // tlaloc bench step: the three-lane step table
void register_finetune(CLI::App& app);  // tlaloc finetune DIR (cmd_finetune.cpp)
void register_merge(CLI::App& app);     // tlaloc merge DIR ADAPTER OUT (cmd_finetune.cpp)

// A recipe whose train step `tlaloc export NAME` prints: `step` builds the whole captured
// train step (forward, gradient, optimizer update, aliases). Register before parsing.
struct ExportRecipe {
  std::string name;  // "disc", "fmnist", "lm"
  std::string help;  // one line
  // The step for `replicas` processes of data parallelism (1: none): each takes batch / replicas
  // rows, and the program all-reduces the loss and gradients across them; `precision` the
  // dots' compute type (f32, bf16, f16); `flat_state` the optimizer state in buckets (the pjrt
  // lane's layout, optim::UpdateOptions::flat_state).
  std::function<ir::Function(int replicas, DType precision, bool flat_state)> step;
};
// Adds (or replaces, by name) a recipe; throws tlaloc::Error if name is empty or step unset.
void add_export_recipe(ExportRecipe recipe);
void register_train_disc(CLI::App& train);    // tlaloc train disc
void register_train_fmnist(CLI::App& train);  // tlaloc train fmnist
void register_train_lm(CLI::App& train);      // tlaloc train lm (train_lm.cpp)
void register_train_llama(CLI::App& train);   // tlaloc train llama (train_llama.cpp)
void register_eval(CLI::App& app);            // tlaloc eval CKPT
void register_sample(CLI::App& app);          // tlaloc sample CKPT (cmd_sample.cpp)
void register_tokenizer(CLI::App& app);       // tlaloc tokenizer train|encode|decode|info
void register_plot(CLI::App& app);            // tlaloc plot METRICS.csv... -o FILE.png

// The status main() returns after a command that threw nothing: 0 unless a command set another
// (e.g. 130: a training run stopped by Ctrl-C or SIGTERM, its checkpoint saved).
void set_exit_status(int status);
int exit_status();

// SIGINT, SIGTERM, SIGHUP and SIGPIPE (unless ignored) remove the temporaries of saves in progress
// (io::remove_live_temporaries) before they end the process; train::fit replaces this with its
// own handling while it runs.
void remove_temporaries_on_signals();

}  // namespace tlaloc::app

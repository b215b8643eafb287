// Subcommands of the `tlaloc` command. Each lives in its own cmd_*.cpp and registers itself on
// the root CLI::App; main.cpp calls every register_* below.
#pragma once

#include <CLI/CLI.hpp>

namespace tlaloc::app {

// A new command: declare its register_* here, define it in cmd_<name>.cpp, call it in main.cpp.
void register_train(CLI::App& app);  // tlaloc train disc|fmnist|lm

}  // namespace tlaloc::app

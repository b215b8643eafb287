// Options shared by every `tlaloc train` recipe: the flags behind recipes::Common.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "tlaloc/recipes/common.h"

namespace tlaloc::app {

// The flags that are parsed as text first; resolve() turns them into recipes::Common fields.
struct CommonTrainFlags {
  std::string lane = "host";
  std::string precision = "f32";             // compute type of dots: f32 | bf16 | f16
  std::string matmul_precision = "default";  // pjrt lane f32 dots: default | high | highest
  std::string cross_check = "warn";          // pjrt lane: off | warn | require
  std::string flat_state = "auto";           // optimizer state layout: auto | on | off
  std::string save, resume;
  CLI::Option* save_option = nullptr;
  CLI::Option* resume_option = nullptr;
  bool save_by_default = false;
  CLI::App* command = nullptr;  // the recipe's command (add_checkpoint_options)
};

// Adds --seed --log-every --threads --schedule --warmup --lane --precision --matmul-precision
// --cross-check --flat-state --deterministic
// (into `c` and `f`).
void add_common_options(CLI::App* cmd, CommonTrainFlags& f, recipes::Common& c);
// Adds --save (default `default_save`; empty: a checkpoint only when --save is given),
// --save-every, --stop-after, --resume, --metrics and --plot.
void add_checkpoint_options(CLI::App* cmd, CommonTrainFlags& f, recipes::Common& c,
                            const std::string& default_save);
// --lr and --wd of a recipe trained with AdamW (finite numbers >= 0, checked by the parser).
void add_adamw_options(CLI::App* cmd, double& lr, double& wd);
// Throws tlaloc::Error "<command>: --plot is empty ..." when one of `flags` of `cmd` was given
// as "" (an unset variable): a picture option names a file or is left out.
void refuse_empty_outputs(const CLI::App* cmd, std::initializer_list<const char*> flags);
// Sets c.lane, c.precision, c.matmul_precision, c.cross_check, c.save and c.resume from the
// parsed flags (a flag
// given as
// "" stays "", which the recipe refuses). Throws tlaloc::Error for a bad --lane or --precision,
// and for a picture option given as "" (--plot, --confusion, --boundary).
void resolve(const CommonTrainFlags& f, recipes::Common& c);
// A run stopped by SIGINT / SIGTERM (saved first) makes the command exit with status 130.
void set_exit_status(const train::FitResult& r);

}  // namespace tlaloc::app

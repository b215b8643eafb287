// Strict integer options for every `tlaloc` command. CLI11 2.1 reads integers with strtoll base 0
// ("--steps 010" is 8, "0x10" is 16); here an integer option takes plain decimal only
// ([-]digits, leading zeros allowed and read as decimal), and a value outside int64 / uint64 is
// an error naming the option, instead of a silently clamped number.
#pragma once

#include <CLI/CLI.hpp>

namespace tlaloc::app {

// Adds the decimal check (a transform to the canonical decimal text) to every INT / UINT option
// of `app` and of its subcommands, recursively. Call after every option is registered.
void require_decimal_integers(CLI::App& app);

// A check for real-valued hyper-parameters (--lr, --wd): a finite number >= 0, else "Value X
// must be a finite number >= 0" before any work starts.
CLI::Validator finite_non_negative();

}  // namespace tlaloc::app

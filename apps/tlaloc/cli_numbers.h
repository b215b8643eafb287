// Strict numeric options for every `tlaloc` command. CLI11 2.1 reads integers with strtoll base 0
// ("--steps 010" is 8, "0x10" is 16); here an integer option takes plain decimal only
// ([-]digits, leading zeros allowed and read as decimal), and a value outside int64 / uint64 is
// an error naming the option, instead of a silently clamped number. A real-valued option must
// be a number: an empty value ("--dropout ''", an unset variable) is an error, not 0.
#pragma once

#include <CLI/CLI.hpp>

namespace tlaloc::app {

// Adds the decimal check (a transform to the canonical decimal text) to every INT / UINT option
// and the number check to every FLOAT option of `app` and of its subcommands, recursively. Call
// after every option is registered.
void require_strict_numbers(CLI::App& app);

// Adds to every text option and argument of `app` and of its subcommands, recursively, a check
// that refuses an empty value (an unset shell variable: `--adapter "$A"` with A unset) with
// tlaloc::Error "COMMAND: FLAG is empty (an unset variable?)", where it would otherwise mean
// "not given" and run something else (a full fine-tune instead of an adapter's, the base model
// instead of its adapter). The options with a message of their own (--save, --resume, -o, the
// pictures, --prompt) and --title (empty: no title) are left to it. Call after registration.
void refuse_empty_values(CLI::App& app);

// The most host threads a command takes (--threads, OMP_NUM_THREADS).
inline constexpr int kMaxThreads = 4096;
// The largest step count an option takes (--warmup, --save-every, --stop-after).
inline constexpr int64_t kMaxSteps = int64_t(1) << 40;

// Refuses an OMP_NUM_THREADS whose first value is past kMaxThreads (OpenMP would try to start
// that many threads and fail deep inside as "out of memory"): tlaloc::Error naming the variable.
void check_thread_environment();

// A check for real-valued hyper-parameters (--lr, --wd): a finite number >= 0, else "Value X
// must be a finite number >= 0" before any work starts.
CLI::Validator finite_non_negative();

}  // namespace tlaloc::app

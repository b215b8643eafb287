// The `tlaloc` command: train, evaluate, inspect, export and plot models. See README.md.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include <fmt/format.h>

#include "apps/tlaloc/cli_numbers.h"
#include "apps/tlaloc/commands.h"
#include "tlaloc/core/error.h"
#include "tlaloc/distributed/communicator.h"
#include "tlaloc/io/atomic_file.h"

namespace tlaloc::app {
namespace {
int g_exit_status = 0;

// A signal that ends the process outside train::fit (which saves on the first one): the
// temporary of a save or export in progress is removed, then the signal does what it does by
// default (the process ends with the signal's status).
extern "C" void on_fatal_signal(int sig) {
  io::remove_live_temporaries();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace
void set_exit_status(int status) { g_exit_status = status; }
int exit_status() { return g_exit_status; }

void remove_temporaries_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    struct sigaction old {};
    sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // e.g. nohup: stays ignored
    struct sigaction sa {};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}
}  // namespace tlaloc::app

namespace {

// "unknown command 'foo' (known: ...)" (or "train: unknown recipe 'foo'", "bench: unknown
// command 'foo'") when the words of argv before the first option name a subcommand that does
// not exist where one is required; "" otherwise (CLI11 reports everything else).
std::string unknown_subcommand(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    auto subs = at->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return "";  // a command's positional arguments follow
    std::string known;
    CLI::App* next = nullptr;
    for (CLI::App* s : subs) {
      if (s->get_name() == argv[i]) next = s;
      known += (known.empty() ? "" : ", ") + s->get_name();
    }
    if (!next) {
      const std::string where = at == &app ? "" : at->get_name() + ": ";
      const char* what = at->get_name() == "train" ? "recipe" : "command";
      return where + "unknown " + what + " '" + argv[i] + "' (known: " + known + ")";
    }
    at = next;
  }
  return "";
}

}  // namespace

namespace {

// Parses the command line and runs the command; its exit status. `rank` prefixes errors.
int run(CLI::App& app, int argc, char** argv, const std::string& rank) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A usage error: the same "tlaloc: error:" line as every other error, exit status 2.
    std::fprintf(stderr, "tlaloc: error: %s%s\nRun with --help for more information.\n",
                 rank.c_str(), e.what());
    return 2;
  } catch (const tlaloc::Error& e) {
    std::fprintf(stderr, "tlaloc: error: %s%s\n", rank.c_str(), e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tlaloc: error: %sout of memory\n", rank.c_str());
    return 1;
  } catch (const std::exception& e) {  // a bug: still one line, not an abort
    std::fprintf(stderr, "tlaloc: internal error: %s%s\n", rank.c_str(), e.what());
    return 1;
  }
  // What the command printed (a StableHLO module, an inspection, sampled text) must reach its
  // destination: a full disk or a closed pipe is an error, not a silent truncation.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "tlaloc: error: %scannot write the output: %s\n", rank.c_str(),
                 std::strerror(errno));
    return 1;
  }
  return tlaloc::app::exit_status();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tlaloc: compiled training steps in C++ (host CPU lane; StableHLO/PJRT lane)"};
  app.name("tlaloc");
  app.require_subcommand(1);
  app.set_version_flag("--version", TLALOC_VERSION);
  tlaloc::app::register_train(app);
  tlaloc::app::register_export(app);
  tlaloc::app::register_eval(app);
  tlaloc::app::register_sample(app);
  tlaloc::app::register_inspect(app);
  tlaloc::app::register_bench(app);
  tlaloc::app::register_tokenizer(app);
  tlaloc::app::register_plot(app);
  tlaloc::app::register_finetune(app);
  tlaloc::app::register_merge(app);
  tlaloc::app::require_strict_numbers(app);
  tlaloc::app::refuse_empty_values(app);
  if (argc == 1) {  // no command: the usage, as `tlaloc --help` prints it
    std::fputs(app.help().c_str(), stdout);
    return 2;
  }
  // `tlaloc foo`, `tlaloc train foo`: CLI11 alone says "A subcommand is required"; name it.
  if (std::string unknown = unknown_subcommand(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "tlaloc: error: %s\n", unknown.c_str());
    return 2;
  }
  tlaloc::app::remove_temporaries_on_signals();
  try {
    tlaloc::app::check_thread_environment();
  } catch (const tlaloc::Error& e) {
    std::fprintf(stderr, "tlaloc: error: %s\n", e.what());
    return 2;
  }
  // Started by mpirun: one rank of a data-parallel run. Rank 0 alone prints what the command
  // prints; an error on any rank names the rank and ends them all (none waits for it forever).
  int rc = 0;
  try {
    tlaloc::distributed::init_world();
  } catch (const tlaloc::Error& e) {
    std::fprintf(stderr, "tlaloc: error: %s\n", e.what());
    return 1;
  }
  tlaloc::distributed::Communicator& world = tlaloc::distributed::world();
  const std::string rank =
      world.size() > 1 ? fmt::format("[rank {} of {}] ", world.rank(), world.size()) : "";
  if (world.rank() != 0 && !std::freopen("/dev/null", "w", stdout)) return 1;
  // Every process of a run must be started alike (mpirun's MPMD form, `A : B`, can differ).
  std::string args;
  for (int i = 1; i < argc; ++i) args.append(argv[i]).push_back('\0');
  if (int r = tlaloc::distributed::first_rank_differing(tlaloc::distributed::fnv1a(args)); r >= 0) {
    std::fprintf(stderr,
                 "tlaloc: error: %sthe processes were started with different arguments (rank "
                 "%d's differ from rank 0's): start every process alike\n",
                 rank.c_str(), r);
    std::fflush(stderr);
    std::_Exit(2);
  }
  rc = run(app, argc, argv, rank);
  if (rc != 0 && rc != 130 && world.size() > 1) {
    // Out without MPI_Finalize (which would wait for the others): mpirun sees a rank end with
    // a non-zero status and ends the job, the others included.
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(rc);
  }
  return rc;
}

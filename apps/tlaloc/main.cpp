// The `tlaloc` command: train, evaluate, inspect and export models. See README.md.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "apps/tlaloc/cli_numbers.h"
#include "apps/tlaloc/commands.h"
#include "tlaloc/core/error.h"

namespace tlaloc::app {
namespace {
int g_exit_status = 0;
}  // namespace
void set_exit_status(int status) { g_exit_status = status; }
int exit_status() { return g_exit_status; }
}  // namespace tlaloc::app

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
  tlaloc::app::require_decimal_integers(app);
  if (argc == 1) {  // no command: the usage, as `tlaloc --help` prints it
    std::fputs(app.help().c_str(), stdout);
    return 2;
  }
  // `tlaloc train foo`: CLI11 alone says "A subcommand is required"; name the recipe instead.
  if (argc >= 3 && std::strcmp(argv[1], "train") == 0 && argv[2][0] != '-') {
    std::string known;
    bool found = false;
    for (CLI::App* r :
         app.get_subcommand("train")->get_subcommands([](CLI::App*) { return true; })) {
      found = found || r->get_name() == argv[2];
      known += (known.empty() ? "" : ", ") + r->get_name();
    }
    if (!found) {
      std::fprintf(stderr, "tlaloc: error: train: unknown recipe '%s' (known: %s)\n", argv[2],
                   known.c_str());
      return 1;
    }
  }
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
    std::fprintf(stderr, "tlaloc: error: %s\nRun with --help for more information.\n", e.what());
    return 2;
  } catch (const tlaloc::Error& e) {
    std::fprintf(stderr, "tlaloc: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tlaloc: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {  // a bug: still one line, not an abort
    std::fprintf(stderr, "tlaloc: internal error: %s\n", e.what());
    return 1;
  }
  // What the command printed (a StableHLO module, an inspection, sampled text) must reach its
  // destination: a full disk or a closed pipe is an error, not a silent truncation.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "tlaloc: error: cannot write the output: %s\n", std::strerror(errno));
    return 1;
  }
  return tlaloc::app::exit_status();
}

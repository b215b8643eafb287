// tlaloc train (placeholder registration until the command lands).
#include "apps/tlaloc/commands.h"

namespace tlaloc::app {

void register_train(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "not available yet in this build");
  cmd->callback([] { throw CLI::RuntimeError("tlaloc train is not implemented yet", 2); });
}

}  // namespace tlaloc::app

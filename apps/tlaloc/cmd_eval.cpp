// tlaloc eval CKPT: test accuracy and confusion matrix of a saved Fashion-MNIST model.
#include <fmt/format.h>

#include <optional>

#include "apps/tlaloc/commands.h"
#include "tlaloc/recipes/fmnist.h"
#include "tlaloc/train/progress.h"

namespace tlaloc::app {

void register_eval(CLI::App& app) {
  static std::string path, data = io::kFashionMnistDir;
  auto* cmd =
      app.add_subcommand("eval", "test accuracy and confusion matrix of a fmnist checkpoint");
  cmd->add_option("CKPT", path, "checkpoint written by `tlaloc train fmnist`")->required();
  cmd->add_option("--data", data, "folder with the idx .gz files")->capture_default_str();
  cmd->callback([] {
    namespace fmnist = recipes::fmnist;
    std::optional<train::Activity> running(std::in_place, "evaluating " + path, stdout);
    fmnist::CheckpointEval e = fmnist::evaluate_checkpoint(path, data);
    running.reset();
    fmt::print("{}: step {}, {} parameters\n", path, e.step, e.parameters);
    fmt::print("test loss {:.4f}  test accuracy {:.2f}% on {} images\n\n", e.metrics.loss,
               100 * e.metrics.accuracy, e.images);
    fmt::print("{}", fmnist::format_confusion(e.metrics));
  });
}

}  // namespace tlaloc::app

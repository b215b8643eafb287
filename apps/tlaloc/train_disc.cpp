// tlaloc train disc: the seed demo. See tlaloc/recipes/disc.h.
#include "apps/tlaloc/cli_numbers.h"
#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/recipes/disc.h"

namespace tlaloc::app {

void register_train_disc(CLI::App& train) {
  static CommonTrainFlags f;
  static recipes::disc::Config c;
  auto* cmd = train.add_subcommand("disc", "MLP 2-16-16-1 learns a disc (the seed demo)");
  add_common_options(cmd, f, c.common);
  cmd->add_option("--steps", c.steps, "training steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd->add_option("--lr", c.lr, "Adam learning rate")
      ->capture_default_str()
      ->check(finite_non_negative());
  cmd->add_option("--points", c.points, "training points")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  add_checkpoint_options(cmd, f, c.common, "");
  cmd->add_option("--boundary", c.boundary,
                  "write the learned boundary beside the true disc (PNG) here at the end");
  cmd->callback([] {
    resolve(f, c.common);
    set_exit_status(recipes::disc::run(c));
  });
  add_export_recipe({"disc", "the disc demo's train step (MLP 2-16-16-1, Adam in the program)",
                     [](int replicas, DType precision, bool flat) {
                       if (replicas != 1)
                         fail(
                             "tlaloc export disc: --replicas {}: the disc demo trains on one "
                             "process (its points are not split)",
                             replicas);
                       return recipes::disc::train_step(512, precision, flat).fn;
                     }});
}

}  // namespace tlaloc::app

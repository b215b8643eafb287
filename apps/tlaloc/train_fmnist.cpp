// tlaloc train fmnist: an MLP or a CNN on Fashion-MNIST with AdamW inside the compiled step. See
// tlaloc/recipes/fmnist.h.
#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/recipes/fmnist.h"

namespace tlaloc::app {

void register_train_fmnist(CLI::App& train) {
  static CommonTrainFlags f;
  // Defaults that reach >= 88% in 5 epochs: linear warm-up over the first epoch, then cosine.
  static recipes::fmnist::Config c;
  auto* cmd =
      train.add_subcommand("fmnist", "MLP or CNN classifier on Fashion-MNIST (AdamW in the step)");
  add_common_options(cmd, f, c.common);
  cmd->add_option("--data", c.data, "folder with the idx .gz files")->capture_default_str();
  cmd->add_option("--model", c.model, "mlp, or cnn (conv blocks with batch norm)")
      ->capture_default_str();
  cmd->add_option("--hidden", c.hidden, "mlp: hidden layer sizes, e.g. 512,256")
      ->capture_default_str();
  cmd->add_option("--channels", c.channels,
                  "cnn: channels of the conv blocks (Conv2d 3x3, BatchNorm2d, ReLU, MaxPool2d 2)")
      ->capture_default_str();
  cmd->add_option("--epochs", c.epochs, "epochs")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd->add_option("--batch", c.batch, "batch size (fixed: the step compiles once)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  add_adamw_options(cmd, c.lr, c.wd);
  cmd->add_option("--limit", c.limit, "use only the first N training rows (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  add_checkpoint_options(cmd, f, c.common, c.common.save.value_or(""));
  cmd->add_option("--confusion", c.confusion,
                  "write the test set's confusion matrix as a heat map (PNG) here at the end");
  CLI::Option* warmup = cmd->get_option("--warmup");
  CLI::Option* hidden = cmd->get_option("--hidden");
  CLI::Option* channels = cmd->get_option("--channels");
  warmup->description("linear warm-up steps (default: one epoch's, shortened to the run)")
      ->default_str("");
  cmd->callback([warmup, hidden, channels] {
    resolve(f, c.common);
    c.warmup_given = warmup->count() > 0;
    c.other_model_flag.reset();
    if (c.model == "cnn" && hidden->count() > 0) c.other_model_flag = "--hidden";
    if (c.model != "cnn" && channels->count() > 0) c.other_model_flag = "--channels";
    set_exit_status(recipes::fmnist::run(c));
  });
  add_export_recipe(
      {"fmnist", "the fmnist job's train step (MLP 784-256-10, AdamW in the program)",
       [](int replicas, DType precision, bool flat) {
         return recipes::fmnist::train_step(60000, 128, {256}, replicas, precision, flat).fn;
       }});
  add_export_recipe(
      {"fmnist-cnn",
       "train fmnist --model cnn's train step (two conv blocks 32, 64, batch norm, "
       "AdamW in the program)",
       [](int replicas, DType precision, bool flat) {
         return recipes::fmnist::train_step_cnn(60000, 128, {32, 64}, replicas, precision, flat).fn;
       }});
}

}  // namespace tlaloc::app

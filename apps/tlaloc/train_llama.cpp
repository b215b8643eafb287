// tlaloc train llama: a Llama model (HF layout) on text with a SentencePiece tokenizer, AdamW
// inside the step, written as a HuggingFace model directory. See tlaloc/recipes/llama.h.
#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/recipes/llama.h"

namespace tlaloc::app {

void register_train_llama(CLI::App& train) {
  static CommonTrainFlags f;
  static recipes::llama::Config c;
  static int64_t context = 0, batch = 0;
  auto* cmd = train.add_subcommand(
      "llama", "Llama model (HF layout) with a SentencePiece tokenizer (AdamW in the step)");
  add_common_options(cmd, f, c.common);
  cmd->add_option("--preset", c.preset, "model size: tiny | small | medium (default: tiny)")
      ->check(CLI::IsMember({"tiny", "small", "medium"}));
  cmd->add_option("--config", c.config_json, "a HuggingFace LlamaConfig config.json");
  cmd->add_option("--init", c.init, "start from this HF model directory (config and weights)");
  auto* ctx = cmd->add_option("--context", context,
                              "tokens per window (default: the preset's; small's otherwise)")
                  ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  auto* bat = cmd->add_option("--batch", batch, "windows per step (default: as --context)")
                  ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--tokenizer", c.tokenizer,
                  "SentencePiece .model, or a folder with tokenizer.model (default: the --init "
                  "folder's, else a BPE model of vocab_size trained on the training text)");
  cmd->add_option("--text", c.text,
                  "text files (default: the King James Bible (bible-kjv) and Debian's fortunes)");
  cmd->add_option("--steps", c.steps, "training steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  add_adamw_options(cmd, c.lr, c.wd);
  add_checkpoint_options(cmd, f, c.common, "");
  f.save_option->description(
      "model directory to write (default: llama-<preset>; llama-model with --config / --init); "
      "its training state goes beside it as DIR.training.safetensors");
  f.resume_option->description("continue from this model directory (and its training state)");
  cmd->callback([ctx, bat] {
    resolve(f, c.common);
    if (ctx->count() > 0) c.context = context;
    if (bat->count() > 0) c.batch = batch;
    set_exit_status(recipes::llama::run(c));
  });
}

}  // namespace tlaloc::app

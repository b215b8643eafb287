// tlaloc train lm: a byte-level causal transformer LM on text files, AdamW inside the step. See
// tlaloc/recipes/lm.h.
#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/recipes/lm.h"

namespace tlaloc::app {

void register_train_lm(CLI::App& train) {
  static CommonTrainFlags f;
  static recipes::lm::Config c;
  auto* cmd = train.add_subcommand("lm", "byte-level causal transformer LM (AdamW in the step)");
  add_common_options(cmd, f, c.common);
  cmd->add_option("--text", c.text, "text files (default: Debian's English fortunes)");
  cmd->add_option("--steps", c.steps, "training steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd->add_option("--batch", c.batch, "windows per step")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  // A model size: a positive count (0 or less failed only after the corpus was read).
  auto size = [cmd](const char* flag, int64_t& v, const char* help) {
    return cmd->add_option(flag, v, help)
        ->capture_default_str()
        ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  };
  size("--layers", c.model.layers, "transformer blocks");
  size("--d-model", c.model.d_model, "model width");
  // Heads are checked with --d-model by the recipe, which names all three.
  cmd->add_option("--heads", c.model.heads, "query heads")->capture_default_str();
  cmd->add_option("--kv-heads", c.model.kv_heads, "key/value heads (GQA/MQA)")
      ->capture_default_str();
  size("--context", c.model.context, "context length (bytes)");
  size("--d-ff", c.model.d_ff, "MLP hidden width");
  cmd->add_flag(
      "--tied", c.model.tied,
      "tie the head to the token embedding (both embeddings then start N(0, 0.02), GPT-2's init)");
  cmd->add_option("--norm", c.model.norm, "layernorm | rmsnorm")
      ->capture_default_str()
      ->check(CLI::IsMember({"layernorm", "rmsnorm"}));
  cmd->add_option("--gelu", c.model.gelu, "GELU approximate: tanh | none (erf)")
      ->capture_default_str()
      ->check(CLI::IsMember({"tanh", "none"}));
  cmd->add_option("--dropout", c.model.dropout, "dropout p on embeddings and residual branches")
      ->capture_default_str();
  add_adamw_options(cmd, c.lr, c.wd);
  add_checkpoint_options(cmd, f, c.common, c.common.save.value_or(""));
  cmd->callback([] {
    resolve(f, c.common);
    set_exit_status(recipes::lm::run(c));
  });
  add_export_recipe(
      {"lm", "the benchmark LM's train step (2x128, 4 heads, ctx 16, AdamW)",
       [](int replicas, DType precision, bool flat) {
         return recipes::lm::bench_train_step(4096, 20260921, replicas, precision, flat).fn;
       }});
}

}  // namespace tlaloc::app

// tlaloc finetune DIR: full fine-tuning (optionally with frozen parameters) or LoRA of a Llama
// model directory on text, the optimizer in the compiled step; `tlaloc merge DIR ADAPTER OUT`
// folds a PEFT adapter into a plain model directory. See tlaloc/recipes/llama.h.
#include "apps/tlaloc/cli_numbers.h"
#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/io/peft.h"
#include "tlaloc/recipes/llama.h"
#include "tlaloc/recipes/lm.h"
#include "tlaloc/recipes/lm_adapter.h"

#include <filesystem>

namespace tlaloc::app {

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

void register_finetune(CLI::App& app) {
  static CommonTrainFlags f;
  static recipes::llama::Config c;
  static bool lora = false;
  static nn::LoraConfig lc{.lora_alpha = 16};
  static std::string targets = "q_proj,v_proj";
  static int64_t context = 0, batch = 0;
  c.name = "finetune";
  c.steps = 200;
  c.lr = 2e-4;
  c.wd = 0;
  auto* cmd = app.add_subcommand(
      "finetune",
      "fine-tune a Llama model directory or a `train lm` checkpoint on text: all weights, some "
      "frozen (--freeze), or LoRA adapters (--lora, written as a PEFT adapter directory)");
  cmd->add_option("DIR", c.init,
                  "the HuggingFace model directory, or the `tlaloc train lm` checkpoint, to start "
                  "from")
      ->required();
  add_common_options(cmd, f, c.common);
  cmd->add_option("--text", c.text,
                  "text files (default: the King James Bible (bible-kjv) and Debian's fortunes)");
  cmd->add_option("--tokenizer", c.tokenizer,
                  "SentencePiece .model (default: DIR/tokenizer.model)");
  auto* ctx =
      cmd->add_option(
             "--context", context,
             "tokens per window (default: 256, or the model's max_position_embeddings if fewer)")
          ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  auto* bat = cmd->add_option("--batch", batch, "windows per step (default: 8)")
                  ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--steps", c.steps, "training steps")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  add_adamw_options(cmd, c.lr, c.wd);
  cmd->add_option("--freeze", c.freeze,
                  "freeze the parameters whose dotted names match this glob (repeatable), e.g. "
                  "'model.embed_tokens.*'");
  auto* lora_flag =
      cmd->add_flag("--lora", lora, "train LoRA adapters; the base model stays frozen");
  auto* adapter_opt = cmd->add_option("--adapter", c.adapter,
                                      "train on from this PEFT LoRA adapter directory's weights "
                                      "(its r, alpha, dropout and targets)");
  std::vector<CLI::Option*> lora_opts{
      cmd->add_option("--r", lc.r, "LoRA rank")
          ->capture_default_str()
          ->check(CLI::Range(int64_t(1), int64_t(1) << 20)),
      cmd->add_option("--alpha", lc.lora_alpha, "LoRA lora_alpha (scaling alpha / r)")
          ->capture_default_str()
          ->check(finite_non_negative()),
      cmd->add_option("--dropout", lc.lora_dropout, "LoRA lora_dropout, a fresh key every step")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 0.999999)),
      cmd->add_flag("--rslora", lc.use_rslora, "rank-stabilised scaling alpha / sqrt(r)"),
      cmd->add_option("--target", targets,
                      "LoRA target_modules: module names, comma-separated, or all-linear")
          ->capture_default_str()};
  for (CLI::Option* o : lora_opts) {
    o->needs(lora_flag);  // a LoRA option without --lora would be ignored
    o->excludes(adapter_opt);
  }
  add_checkpoint_options(cmd, f, c.common, "");
  f.save_option->description(
      "output: a model directory (default llama-model) or, with --lora, a PEFT adapter directory "
      "(default llama-lora), its training state beside it as OUT.training.safetensors; of a "
      "`train lm` checkpoint: a checkpoint (default lm-finetuned.safetensors) or, with --lora, "
      "an adapter directory (default lm-lora)");
  f.resume_option->description("continue from this output (and its training state)");
  cmd->callback([ctx, bat] {
    resolve(f, c.common);
    if (ctx->count() > 0) c.context = context;
    if (bat->count() > 0) c.batch = batch;
    c.lora.reset();
    if (!c.adapter.empty()) {  // its config is the run's
      const io::PeftLoraConfig a = io::load_peft_adapter(c.adapter).config;
      c.lora = nn::LoraConfig{.r = a.r,
                              .lora_alpha = a.lora_alpha,
                              .lora_dropout = a.lora_dropout,
                              .use_rslora = a.use_rslora,
                              .target_modules = a.target_modules};
    } else if (lora) {
      lc.target_modules = split_commas(targets);
      c.lora = lc;
    }
    std::error_code ec;
    if (std::filesystem::is_regular_file(c.init, ec)) {  // a `train lm` checkpoint
      if (!c.tokenizer.empty() || !c.adapter.empty() || c.context)
        fail(
            "finetune: {} is a `train lm` checkpoint (bytes, its own context): --tokenizer, "
            "--adapter and --context are for Llama directories",
            c.init);
      recipes::lm::Config l;
      l.common = c.common;
      if (!l.common.save) l.common.save = c.lora ? "lm-lora" : "lm-finetuned.safetensors";
      l.text = c.text;
      l.steps = c.steps;
      l.lr = c.lr;
      l.wd = c.wd;
      if (c.batch) l.batch = *c.batch;
      l.init = c.init;
      l.freeze = c.freeze;
      l.lora = c.lora;
      l.name = "finetune";
      set_exit_status(recipes::lm::run(l));
      return;
    }
    set_exit_status(recipes::llama::run(c));
  });
}

}  // namespace tlaloc::app

namespace tlaloc::app {

void register_merge(CLI::App& app) {
  static std::string dir, adapter, out;
  auto* cmd = app.add_subcommand(
      "merge",
      "fold a PEFT LoRA adapter into a Llama model directory or a `train lm` checkpoint: W + "
      "scaling * B A, in f32");
  cmd->add_option("DIR", dir, "the base model directory, or `train lm` checkpoint")->required();
  cmd->add_option("ADAPTER", adapter, "the PEFT adapter directory")->required();
  cmd->add_option("OUT", out,
                  "the merged model directory to write (of a `train lm` checkpoint: a checkpoint "
                  "file)")
      ->required();
  cmd->callback([] {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec) && std::filesystem::is_regular_file(dir, ec))
      recipes::lm::merge_adapter(dir, adapter, out, stdout);
    else
      recipes::llama::merge_adapter(dir, adapter, out, stdout);
  });
}

}  // namespace tlaloc::app

// tlaloc eval CKPT: a Llama model directory (a folder with config.json) or a `train lm`
// checkpoint scored on text (loss, perplexity, bits per byte: recipes/text_score.h), or a
// fmnist checkpoint's test accuracy and confusion matrix.
#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "apps/tlaloc/cli_numbers.h"
#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/io/atomic_file.h"
#include "tlaloc/plot/canvas.h"
#include "tlaloc/recipes/fmnist.h"
#include "tlaloc/recipes/generate.h"
#include "tlaloc/recipes/llama.h"
#include "tlaloc/recipes/lm.h"
#include "tlaloc/recipes/lm_adapter.h"
#include "tlaloc/train/progress.h"

namespace tlaloc::app {

namespace {

struct EvalArgs {
  std::string path, data = io::kFashionMnistDir;
  std::vector<std::string> text;
  int threads = 0;
  std::string confusion;           // fmnist: the confusion matrix as a PNG
  std::string adapter;             // llama: a PEFT LoRA adapter directory
  std::optional<int64_t> context;  // the scoring window; unset: the model's
};

// The scoring window: --context when given (at most `most`, the model's positions), else `dflt`.
int64_t scoring_context(const EvalArgs& a, int64_t dflt, int64_t most, const char* limit) {
  if (!a.context) return dflt;
  if (*a.context > most)
    fail("eval: --context {} is more than the model's {} {}", *a.context, limit, most);
  return *a.context;
}

void eval_llama(const EvalArgs& a) {
  namespace llama = recipes::llama;
  llama::LoadedDir d = llama::load_dir(a.path);
  if (!a.adapter.empty()) llama::add_adapter(d, a.path, a.adapter);
  d.context = scoring_context(a, d.context, d.model->config().max_position_embeddings,
                              "max_position_embeddings");
  const std::string& run = a.adapter.empty() ? a.path : a.adapter;  // whose training run
  std::vector<llama::Document> docs;
  std::string what;
  if (a.text.empty()) {
    docs = llama::held_out_documents(d.state, run);
    what =
        fmt::format("the held-out text of its training run ({} bytes)", llama::total_bytes(docs));
  } else {
    docs = llama::read_documents(a.text, "eval: --text");
    what = fmt::format("{} text file{} ({} bytes)", a.text.size(), a.text.size() == 1 ? "" : "s",
                       llama::total_bytes(docs));
  }
  fmt::print("{}: step {}, {} parameters, context {}; on {}\n", run, d.state.step,
             d.model->num_parameters(), d.context, what);
  recipes::TextScore s;
  {
    train::Activity running("evaluating " + a.path, stdout);
    s = llama::score_documents(d, docs, a.threads);
  }
  fmt::print("loss: {}\n", recipes::format_score(s));
}

// A `train lm` checkpoint on the bytes of the --text files, concatenated: every byte after the
// first is predicted (the first is context only) and counted: nats per byte, perplexity per
// byte, bits per byte.
void eval_lm(const EvalArgs& a, const io::Checkpoint& c) {
  if (a.text.empty())
    fail("eval: {} is a `tlaloc train lm` checkpoint; pass the text to score with --text FILE",
         a.path);
  auto model = recipes::lm::load_model(c);
  if (!a.adapter.empty()) recipes::lm::add_adapter(*model, c, a.path, a.adapter);
  const Array bytes = recipes::lm::read_corpus(a.text);
  const int64_t context =
      scoring_context(a, model->config().context, model->config().context, "context");
  fmt::print("{}: step {}, {} parameters, context {}; on {} text file{} ({} bytes)\n",
             a.adapter.empty() ? a.path : a.path + " + " + a.adapter, c.step,
             model->num_parameters(), context, a.text.size(), a.text.size() == 1 ? "" : "s",
             bytes.numel());
  if (bytes.numel() < 2) fail("eval: the text has {} byte; 2 or more are needed", bytes.numel());
  recipes::TextScore s;
  {
    train::Activity running("evaluating " + a.path, stdout);
    s = recipes::score_stream(*model, bytes, context, bytes.numel() - 1, a.threads);
  }
  fmt::print(
      "loss: {:.4f} nats/byte, perplexity {:.3f} (per byte), {:.4f} bits/byte ({} bytes "
      "predicted)\n",
      s.nats_per_token(), s.perplexity(), s.bits_per_byte(), s.tokens);
}

void eval_fmnist(const EvalArgs& a) {
  namespace fmnist = recipes::fmnist;
  std::optional<train::Activity> running(std::in_place, "evaluating " + a.path, stdout);
  fmnist::CheckpointEval e = fmnist::evaluate_checkpoint(a.path, a.data);
  running.reset();
  fmt::print("{}: step {}, {} parameters\n", a.path, e.step, e.parameters);
  fmt::print("test loss {:.4f}  test accuracy {:.2f}% on {} images\n\n", e.metrics.loss,
             100 * e.metrics.accuracy, e.images);
  fmt::print("{}", fmnist::format_confusion(e.metrics));
  if (!a.confusion.empty()) {
    plot::write_file(a.confusion,
                     fmnist::confusion_png(e.metrics, fmt::format("{} (step {}): test accuracy "
                                                                  "{:.2f}%",
                                                                  io::base_name(a.path), e.step,
                                                                  100 * e.metrics.accuracy)));
    fmt::print("wrote {} (the confusion matrix)\n", a.confusion);
  }
}

void run_eval(const EvalArgs& a) {
  std::error_code ec;
  if (!a.confusion.empty()) {  // before any work
    io::check_output_file(a.confusion, "eval: --confusion", io::OutputMode::replace);
    if (io::same_file(a.confusion, a.path))
      fail("eval: --confusion {} is the checkpoint being evaluated", a.confusion);
    io::check_output_png(a.confusion, "eval: --confusion");
  }
  const char* not_fmnist = "eval: --confusion is for `tlaloc train fmnist` checkpoints; {} is {}";
  if (std::filesystem::is_directory(a.path, ec)) {
    if (!a.confusion.empty()) fail(fmt::runtime(not_fmnist), a.path, "a Llama directory");
    if (std::filesystem::exists(a.path + "/adapter_config.json", ec))
      fail("eval: {} is a PEFT adapter directory: run it on its base model, eval BASE --adapter {}",
           a.path, a.path);
    if (!std::filesystem::exists(a.path + "/config.json", ec))
      fail("eval: {} is a folder without config.json (not a model directory)", a.path);
    return eval_llama(a);
  }
  io::Checkpoint c = io::load_checkpoint(a.path);
  auto recipe = c.user.find("recipe");
  if (recipe != c.user.end() && recipe->second == "lm") {
    if (!a.confusion.empty()) fail(fmt::runtime(not_fmnist), a.path, "a `train lm` checkpoint");
    return eval_lm(a, c);
  }
  if (!a.text.empty())
    fail("eval: --text is for Llama directories and `train lm` checkpoints; {} is neither", a.path);
  if (a.context)
    fail("eval: --context is for Llama directories and `train lm` checkpoints; {} is neither",
         a.path);
  if (!a.adapter.empty())
    fail("eval: --adapter is for Llama directories and `train lm` checkpoints; {} is neither",
         a.path);
  eval_fmnist(a);
}

}  // namespace

void register_eval(CLI::App& app) {
  static EvalArgs a;
  auto* cmd = app.add_subcommand(
      "eval",
      "score a Llama directory or lm checkpoint on text (loss, perplexity, bits/byte), or a "
      "fmnist checkpoint on its test set");
  cmd->add_option("CKPT", a.path,
                  "a model directory of `tlaloc train llama`, or a checkpoint of `tlaloc train lm` "
                  "or `tlaloc train fmnist`")
      ->required();
  cmd->add_option("--text", a.text,
                  "text files to score (default for a Llama directory: its run's held-out text)");
  cmd->add_option("--data", a.data, "fmnist: folder with the idx .gz files")->capture_default_str();
  cmd->add_option(
      "--adapter", a.adapter,
      "add this PEFT LoRA adapter directory (of `tlaloc finetune --lora` or PEFT) to the Llama "
      "directory or `train lm` checkpoint");
  cmd->add_option("--context", a.context,
                  "tokens per scoring window (default: the training run's context, else the "
                  "model's max_position_embeddings; lm: its context)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 31));
  cmd->add_option("--threads", a.threads, "host lane threads (0: OpenMP default)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxThreads));
  cmd->add_option("--confusion", a.confusion,
                  "fmnist: write the confusion matrix as a heat map (PNG) to this file");
  cmd->callback([cmd] {
    refuse_empty_outputs(cmd, {"--confusion"});
    run_eval(a);
  });
}

}  // namespace tlaloc::app

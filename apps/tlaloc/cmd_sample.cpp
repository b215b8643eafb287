// tlaloc sample CKPT: text from a `tlaloc train lm` checkpoint or a Llama model directory (a
// folder with config.json), generated with a KV cache.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "apps/tlaloc/cli_numbers.h"
#include "apps/tlaloc/commands.h"
#include "tlaloc/recipes/generate.h"
#include "tlaloc/recipes/llama.h"
#include "tlaloc/recipes/lm_adapter.h"

namespace tlaloc::app {

namespace {

struct SampleArgs {
  std::string path;
  std::optional<std::string> prompt;  // unset: "The " (lm, bytes), "The" (Llama, pieces)
  int64_t tokens = 200;
  recipes::lm::SampleOptions sample;  // temperature, top_k, top_p below when given
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
  int threads = 1;
  std::string adapter;  // llama: a PEFT LoRA adapter directory
  bool ignore_eos = false;
  std::optional<int64_t> context;  // the attention window; unset: the model's
};

// The attention window (--context, at most `most`, else `dflt`) and the KV cache's length: no
// longer than the prompt and the tokens drawn need (the same text: past them nothing is read).
std::pair<int64_t, int64_t> window_and_cache(const SampleArgs& a, int64_t dflt, int64_t most,
                                             const char* limit, size_t prompt) {
  if (a.context && *a.context > most)
    fail("sample: --context {} is more than the model's {} {}", *a.context, limit, most);
  const int64_t window = a.context.value_or(dflt);
  const int64_t need = a.tokens >= window ? window : int64_t(prompt) + a.tokens;  // no overflow
  return {window, std::min(window, need)};
}

// A Llama directory: the prompt encoded with its tokenizer.model (BOS, then its lines, as train
// llama's streams), the text decoded and written a line at a time.
void sample_llama(const SampleArgs& a) {
  namespace llama = recipes::llama;
  const std::string prompt_text = a.prompt.value_or("The");
  text::check_utf8(prompt_text, "sample: --prompt");  // SentencePiece would read U+FFFD
  llama::LoadedDir d = llama::load_dir(a.path);
  if (!a.adapter.empty()) llama::add_adapter(d, a.path, a.adapter);
  const auto& m = d.model->config();
  // No trailing space by default: SentencePiece would make it a piece of its own ("▁"), which
  // the model rarely saw before a word.
  const Array p = llama::encode_stream(*d.tokenizer, {{"--prompt", prompt_text}});
  std::vector<int32_t> ids(p.data<int32_t>(), p.data<int32_t>() + p.numel());
  const auto [window, cache] = window_and_cache(a, d.context, m.max_position_embeddings,
                                                "max_position_embeddings", ids.size());
  d.context = window;
  fmt::print(stderr,
             "{}: step {}, {} parameters (layers {}, hidden {}, heads {}, kv_heads {}, vocab {}), "
             "context {}; past it the window slides (recomputed)\n",
             a.adapter.empty() ? a.path : a.path + " + " + a.adapter, d.state.step,
             d.model->num_parameters(), m.num_hidden_layers, m.hidden_size, m.num_attention_heads,
             m.kv_heads(), m.vocab_size, d.context);
  recipes::lm::Decoder decoder(*d.model, cache, a.threads);
  // HF generate's defaults for this model: generation_config.json's sampling keys, then the
  // flags given over them.
  std::vector<std::string> taken;
  recipes::lm::SampleOptions o = llama::sampling_options(
      d, {a.sample, a.temperature.has_value(), a.top_k.has_value(), a.top_p.has_value()}, taken);
  if (!taken.empty())
    fmt::print(stderr, "sampling with generation_config.json's {} (flags override them)\n",
               fmt::join(taken, ", "));
  o.vocab = d.tokenizer->vocab_size();  // the model's ids past the tokenizer's have no text
  if (!a.ignore_eos) o.eos = d.eos;     // an end-of-sequence id ends the text, unwritten
  // Streamed a line at a time: each line is written once its newline is drawn (a line decodes
  // on its own, as the streams were encoded), the rest at the end.
  const int32_t nl = llama::newline_id(*d.tokenizer);
  size_t from = 0;  // ids before it are written
  auto write = [&](bool last) {
    const std::vector<int32_t> part(ids.begin() + std::ptrdiff_t(from), ids.end());
    const std::string text = llama::decode_stream(*d.tokenizer, part) + (last ? "\n" : "");
    from = ids.size();
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      fail("sample: cannot write the text to stdout: {}", std::strerror(errno));
  };
  const std::vector<int32_t> prompt = ids;
  recipes::lm::generate(decoder, prompt, a.tokens, o, [&](int32_t t) {
    if (std::find(o.eos.begin(), o.eos.end(), t) != o.eos.end()) return;
    ids.push_back(t);
    if (t == nl) write(false);
  });
  write(true);
}

void run_sample(const SampleArgs& a) {
  namespace lm = recipes::lm;
  if (a.prompt && a.prompt->empty())
    fail("sample: --prompt is empty; the model needs at least one byte");
  if (a.tokens < 0) fail("sample: --tokens {} must be >= 0", a.tokens);
  lm::sample_token(std::vector<float>{0.0f}, a.sample, random::key(0));  // checks T, k and p
  std::error_code ec;
  if (std::filesystem::exists(a.path + "/adapter_config.json", ec))
    fail(
        "sample: {} is a PEFT adapter directory: run it on its base model, sample BASE --adapter "
        "{}",
        a.path, a.path);
  if (std::filesystem::is_directory(a.path, ec)) {
    if (!std::filesystem::exists(a.path + "/config.json", ec))
      fail("sample: {} is a folder without config.json (not a model directory)", a.path);
    return sample_llama(a);
  }
  if (a.ignore_eos)
    fail(
        "sample: --ignore-eos is for Llama model directories ({} is an lm checkpoint, which has "
        "no end-of-sequence byte)",
        a.path);
  io::Checkpoint c = io::load_checkpoint(a.path);
  auto model = lm::load_model(c);
  if (!a.adapter.empty()) lm::add_adapter(*model, c, a.path, a.adapter);
  const auto& m = model->config();
  std::vector<int32_t> prompt;
  const std::string text = a.prompt.value_or("The ");
  for (char ch : text) prompt.push_back(int32_t(static_cast<unsigned char>(ch)));
  const auto [window, cache] = window_and_cache(a, m.context, m.context, "context", prompt.size());
  fmt::print(stderr,
             "{}: step {}, {} parameters (layers {}, d_model {}, heads {}, kv_heads {}, context "
             "{}, d_ff {}, {}, gelu {}{}); past the context the window slides (recomputed)\n",
             a.adapter.empty() ? a.path : a.path + " + " + a.adapter, c.step,
             model->num_parameters(), m.layers, m.d_model, m.heads, m.kv_heads, window, m.d_ff,
             m.norm, m.gelu, m.tied ? ", tied head" : "");
  lm::Decoder decoder(static_cast<nn::CachedDecoder&>(*model), cache, a.threads);
  // Streamed: each byte is written as soon as it is drawn (a long --tokens shows progress and
  // can be cut short with Ctrl-C or `| head`).
  // A failed write (a full disk, a closed pipe) stops the run with an error, not exit 0.
  auto flushed = [] {
    if (std::fflush(stdout) != 0 || std::ferror(stdout))
      fail("sample: cannot write the text to stdout: {}", std::strerror(errno));
  };
  std::fwrite(text.data(), 1, text.size(), stdout);
  flushed();
  lm::generate(decoder, prompt, a.tokens, a.sample, [&](int32_t t) {
    std::fputc(static_cast<unsigned char>(t), stdout);
    flushed();
  });
  std::fputc('\n', stdout);
  flushed();
}

}  // namespace

void register_sample(CLI::App& app) {
  static SampleArgs a;
  auto* cmd = app.add_subcommand(
      "sample",
      "generate text from a `tlaloc train lm` checkpoint or a Llama directory (KV-cache decoding)");
  cmd->add_option("CKPT", a.path,
                  "checkpoint written by `tlaloc train lm`, or a Llama model directory (with "
                  "config.json and tokenizer.model)")
      ->required();
  cmd->add_option(
      "--adapter", a.adapter,
      "add this PEFT LoRA adapter directory (of `tlaloc finetune --lora` or PEFT) to the Llama "
      "directory or `train lm` checkpoint");
  cmd->add_option("--prompt", a.prompt,
                  "text to continue (bytes; Llama: encoded with its tokenizer); default \"The \" "
                  "(lm), \"The\" (Llama)");
  cmd->add_flag("--ignore-eos", a.ignore_eos,
                "Llama: go on past an end-of-sequence token (generation_config.json's "
                "eos_token_id, else config.json's), which otherwise ends the text");
  cmd->add_option("--tokens", a.tokens, "bytes (Llama: tokens) to generate")->capture_default_str();
  cmd->add_option("--temperature", a.temperature,
                  "softmax temperature (0: greedy; default 1, or a Llama directory's "
                  "generation_config.json's)");
  cmd->add_option("--top-k", a.top_k,
                  "sample among the k most likely bytes (Llama: tokens; default 0: all, or "
                  "generation_config.json's)");
  cmd->add_option("--top-p", a.top_p,
                  "nucleus sampling: among the most likely tokens whose probabilities sum to p "
                  "(default 1: all, or generation_config.json's)");
  cmd->add_option("--seed", a.sample.seed,
                  "threefry seed (one key split per byte; Llama: per token)")
      ->capture_default_str();
  cmd->add_option("--context", a.context,
                  "attention window in tokens, past which it slides (default: the training run's "
                  "context, else the model's max_position_embeddings; lm: its context)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 31));
  cmd->add_option("--threads", a.threads, "host lane threads (0: OpenMP default)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxThreads));
  cmd->callback([] {
    if (a.temperature) a.sample.temperature = *a.temperature;
    if (a.top_k) a.sample.top_k = *a.top_k;
    if (a.top_p) a.sample.top_p = *a.top_p;
    run_sample(a);
  });
}

}  // namespace tlaloc::app

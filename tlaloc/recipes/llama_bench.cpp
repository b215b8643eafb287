#include "tlaloc/recipes/llama_bench.h"

#include <fmt/format.h>

#include "tlaloc/nn/models/llama.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/lm.h"

namespace tlaloc::recipes::llama {

double train_step_flops(const Preset& p) {
  const nn::models::LlamaConfig& c = p.model;
  const double hidden = double(c.hidden_size), D = double(c.head_size());
  const double q = double(c.num_attention_heads) * D, kv = double(c.kv_heads()) * D;
  const double per_layer =
      hidden * (q + 2 * kv) + q * hidden + 3 * hidden * double(c.intermediate_size);
  const double n = double(c.num_hidden_layers) * per_layer + hidden * double(c.vocab_size);
  const double tokens = double(p.batch * p.context);
  return 6 * n * tokens + 12 * double(c.num_hidden_layers) * q * double(p.context) * tokens;
}

namespace {

// ", LoRA r R (alpha A) on T: N trained" with `lora`, else "".
std::string lora_text(const nn::models::LlamaConfig& cfg,
                      const std::optional<nn::LoraConfig>& lora) {
  if (!lora) return "";
  nn::models::LlamaForCausalLM m(cfg);
  nn::add_lora(m, *lora, random::key(11));
  int64_t n = 0;
  for (auto& q : m.named_parameters())
    if (q.param->requires_grad) n += q.param->value.numel();
  std::string targets;
  for (const auto& t : lora->target_modules) targets += (targets.empty() ? "" : ",") + t;
  return fmt::format(", LoRA r {} (alpha {}) on {}: {} trained", lora->r, lora->lora_alpha, targets,
                     n);
}

}  // namespace

train::StepBenchCase bench_case(const Preset& p, int threads,
                                const std::optional<nn::LoraConfig>& lora) {
  train::StepBenchCase c;
  const int64_t n = 1 << 16, ctx = p.context, batch = p.batch, vocab = p.model.vocab_size;
  const nn::models::LlamaConfig cfg = p.model;
  c.title = fmt::format(
      "LlamaDecoder {} step ({} layers, hidden {}, {} heads / {} kv heads, MLP {} SwiGLU, vocab "
      "{}, ctx {}, batch {}, AdamW in the program; {} parameters, {:.2f} GFLOP per step){}",
      p.name, cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.kv_heads(),
      cfg.intermediate_size, vocab, ctx, batch, nn::models::LlamaForCausalLM(cfg).num_parameters(),
      train_step_flops(p) / 1e9, lora_text(cfg, lora));
  c.make_model = [cfg, lora] {
    auto m = std::make_shared<nn::models::LlamaForCausalLM>(cfg);
    m->init(random::key(20261201));
    if (lora) nn::add_lora(*m, *lora, random::key(11));
    return std::shared_ptr<nn::Module>(m);
  };
  c.loss = lm::sampled_loss_fn(ctx, 1, batch, n, false);
  c.data = lm::sampled_inputs(n);
  c.resident = {{"tokens", random::randint(random::key(7), Shape{n}, 0, vocab)}};
  c.opt = optim::AdamW{.lr = 1e-3, .weight_decay = 0.01};
  c.num_threads = threads;
  return c;
}

}  // namespace tlaloc::recipes::llama

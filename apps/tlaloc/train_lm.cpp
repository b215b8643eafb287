// tlaloc train lm: a byte-level causal transformer LM on text files, AdamW inside the step.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "apps/tlaloc/commands.h"
#include "apps/tlaloc/train_common.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/lm.h"
#include "tlaloc/train/progress.h"

namespace tlaloc::app {
namespace {

struct LmOptions {
  CommonTrainOptions common;
  std::vector<std::string> text;
  nn::CausalLMConfig model = train::lm::bench_config();
  int64_t batch = train::lm::kBenchBatch;
  int64_t steps = 2000;
  double lr = 3e-3, wd = 0.01, val_fraction = 0.1;
  int64_t val_windows = 512, save_every = 0;
  std::string save = "lm.safetensors", resume;
};

Array tokens_range(const Array& t, int64_t begin, int64_t end) {
  Array out(DType::s32, Shape{end - begin});
  std::memcpy(out.raw(), t.data<int32_t>() + begin, size_t(end - begin) * 4);
  return out;
}

void run_lm(LmOptions o) {
  using namespace tlaloc::train;
  auto files = o.text.empty() ? lm::default_corpus() : o.text;
  Array all = lm::read_corpus(files);
  const int64_t n = all.numel(), ctx = o.model.context;
  const int64_t nval = int64_t(double(n) * o.val_fraction), ntrain = n - nval;
  if (ntrain <= ctx + 1 || nval <= ctx + 1)
    fail("train lm: {} bytes are too few for context {} and a {} validation split", n, ctx,
         o.val_fraction);
  Array train_tok = tokens_range(all, 0, ntrain), val_tok = tokens_range(all, ntrain, n);
  fmt::print("corpus: {} files, {} bytes ({} train, {} validation)\n", files.size(), n, ntrain,
             nval);
  auto schedule = resolve_common(o.common, o.steps);
  nn::CausalLM model(o.model);
  model.init(random::key(o.common.seed));
  fmt::print("{}\nparameters: {}\n", model.to_string(), model.num_parameters());
  TrainerOptions topt;
  topt.schedule = schedule;
  topt.num_threads = o.common.threads;
  const bool dropout = o.model.dropout > 0;
  Trainer trainer(model, lm::loss_fn(ctx), lm::data_inputs(ntrain, o.batch, dropout),
                  optim::AdamW{.lr = o.lr, .weight_decay = o.wd}, topt);
  fmt::print("IR: forward {} ops, gradient {} ops, train step (with AdamW) {} ops\n",
             trainer.forward_ops(), trainer.gradient_ops(), trainer.step_function().num_ops());
  const int64_t nw = std::min(o.val_windows, nval - ctx - 1);
  int eval_id =
      trainer.add_eval(lm::loss_fn(ctx), {{DType::s32, Shape{nval}}, {DType::s32, Shape{nw}}});
  Array starts(DType::s32, Shape{nw});
  for (int64_t i = 0; i < nw; ++i)
    starts.data<int32_t>()[i] = int32_t(i * (nval - ctx - 1) / std::max<int64_t>(nw, 1));
  std::map<std::string, std::string> user{{"recipe", "lm"},
                                          {"layers", std::to_string(o.model.layers)},
                                          {"d_model", std::to_string(o.model.d_model)},
                                          {"heads", std::to_string(o.model.heads)},
                                          {"kv_heads", std::to_string(o.model.kv_heads)},
                                          {"context", std::to_string(ctx)},
                                          {"d_ff", std::to_string(o.model.d_ff)},
                                          {"tied", o.model.tied ? "true" : "false"},
                                          {"norm", o.model.norm},
                                          {"gelu", o.model.gelu}};
  if (!o.resume.empty()) {
    io::Checkpoint c = io::load_checkpoint(o.resume);
    for (auto& [k, v] : user)
      if (c.user.count(k) && c.user.at(k) != v)
        fail("--resume {}: it was trained with {}={}, this run has {}", o.resume, k, c.user.at(k),
             v);
    restore(trainer, c);
    fmt::print("resumed from {} at step {}\n", o.resume, trainer.steps_taken());
  }
  trainer.set_resident(0, std::move(train_tok));
  auto save = [&] {
    io::save_checkpoint(o.save, to_checkpoint(trainer, o.common.seed, trainer.steps_taken(), user));
    fmt::print("saved {} (step {})\n", o.save, trainer.steps_taken());
  };
  auto val_bpb = [&] {
    std::vector<Array> in{val_tok, starts};
    return trainer.run_eval(eval_id, in)[0].at(0) / std::log(2.0);
  };
  Progress bar("train lm", o.steps);
  double last = NAN;
  while (trainer.steps_taken() < o.steps) {
    int64_t s = trainer.steps_taken();
    std::vector<Array> in{lm::random_starts(o.common.seed, s, o.batch, ntrain, ctx)};
    if (dropout) in.push_back(lm::dropout_key(o.common.seed, s));
    trainer.step(std::move(in));
    if ((s + 1) % o.common.log_every == 0 || s + 1 == o.steps) {
      last = trainer.read_last().loss / std::log(2.0);
      bar.update(s + 1, last);
    }
    if (o.save_every > 0 && (s + 1) % o.save_every == 0) save();
  }
  bar.finish(o.steps, last);
  double bpb = val_bpb();
  double uni = lm::unigram_bits_per_byte(all, val_tok);
  fmt::print("validation: {:.4f} bits/byte (model)  vs  {:.4f} bits/byte (unigram baseline)\n", bpb,
             uni);
  save();
}

}  // namespace

void register_train_lm(CLI::App& train) {
  static LmOptions o;
  auto* cmd = train.add_subcommand("lm", "byte-level causal transformer LM (AdamW in the step)");
  add_common_options(cmd, o.common);
  cmd->add_option("--text", o.text, "text files (default: Debian's English fortunes)");
  cmd->add_option("--steps", o.steps, "training steps")->capture_default_str();
  cmd->add_option("--batch", o.batch, "windows per step")->capture_default_str();
  cmd->add_option("--layers", o.model.layers, "transformer blocks")->capture_default_str();
  cmd->add_option("--d-model", o.model.d_model, "model width")->capture_default_str();
  cmd->add_option("--heads", o.model.heads, "query heads")->capture_default_str();
  cmd->add_option("--kv-heads", o.model.kv_heads, "key/value heads (GQA/MQA)")
      ->capture_default_str();
  cmd->add_option("--context", o.model.context, "context length (bytes)")->capture_default_str();
  cmd->add_option("--d-ff", o.model.d_ff, "MLP hidden width")->capture_default_str();
  cmd->add_flag("--tied", o.model.tied, "tie the head to the token embedding");
  cmd->add_option("--norm", o.model.norm, "layernorm | rmsnorm")->capture_default_str();
  cmd->add_option("--gelu", o.model.gelu, "GELU approximate: tanh | none (erf)")
      ->capture_default_str();
  cmd->add_option("--dropout", o.model.dropout, "dropout p on embeddings and residual branches")
      ->capture_default_str();
  cmd->add_option("--lr", o.lr, "AdamW learning rate")->capture_default_str();
  cmd->add_option("--wd", o.wd, "AdamW weight decay (decoupled)")->capture_default_str();
  cmd->add_option("--save", o.save, "checkpoint path (safetensors)")->capture_default_str();
  cmd->add_option("--save-every", o.save_every, "also save every N steps");
  cmd->add_option("--resume", o.resume, "continue from this checkpoint");
  cmd->callback([] { run_lm(o); });
  add_export_recipe({"lm", "the benchmark LM's train step (2x128, 4 heads, ctx 16, AdamW)",
                     [] { return train::lm::bench_train_step().fn; }});
}

}  // namespace tlaloc::app

// tlaloc train lm: a byte-level causal transformer LM on text files, AdamW inside the step.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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
  bool resume_given = false;  // --resume "" (e.g. an unset variable) must not train afresh
};

Array tokens_range(const Array& t, int64_t begin, int64_t end) {
  Array out(DType::s32, Shape{end - begin});
  std::memcpy(out.raw(), t.data<int32_t>() + begin, size_t(end - begin) * 4);
  return out;
}

// Checked before the corpus is read or anything is compiled, so a typo fails at once.
void check_options(const LmOptions& o) {
  if (o.batch < 1) fail("train lm: --batch {} must be >= 1", o.batch);
  const auto& m = o.model;
  if (m.heads < 1 || m.kv_heads < 1 || m.d_model % m.heads != 0 || m.heads % m.kv_heads != 0)
    fail(
        "train lm: --d-model {} must be a multiple of --heads {}, itself a multiple of --kv-heads "
        "{} (MHA: equal, GQA: a divisor, MQA: 1)",
        m.d_model, m.heads, m.kv_heads);
  if (!(o.model.dropout >= 0 && o.model.dropout < 1))
    fail("train lm: --dropout {} must be in [0, 1) (1 zeroes every activation)", o.model.dropout);
  if (o.save_every < 0) fail("train lm: --save-every {} must be >= 0", o.save_every);
  if (o.resume_given && o.resume.empty())
    fail("train lm: --resume is empty (an unset variable?); omit it to train from scratch");
  if (o.save.empty()) fail("train lm: --save is empty");
  std::filesystem::path dir = std::filesystem::path(o.save).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    fail("train lm: --save {}: folder {} does not exist", o.save, dir.string());
  if (std::filesystem::is_directory(o.save, ec))
    fail("train lm: --save {} is a folder; give a file name", o.save);
  // Parameters, gradients and AdamW's two moments: 4 f32 per parameter.
  train::lm::check_fits_in_memory(o.model, 16, "train lm");
}

void run_lm(LmOptions o) {
  using namespace tlaloc::train;
  check_options(o);
  TrainerOptions topt;
  apply_lane(o.common, topt);  // a lane that cannot start fails before any work
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
                                          {"gelu", o.model.gelu},
                                          {"dropout", io::exact(o.model.dropout)},
                                          {"batch", std::to_string(o.batch)}};
  if (!o.resume.empty()) {
    io::Checkpoint c = load_resume(o.resume, user, o.common.seed);
    if (c.step >= o.steps)
      fail("--resume {}: it is at step {} already; --steps {} leaves nothing to train", o.resume,
           c.step, o.steps);
    // A resumed run must start from finite numbers: NaN / inf would only train into NaN.
    for (const io::NamedArrays* arrays : {&c.params, &c.optimizer_state})
      require_finite(*arrays, "--resume " + c.source, "tensor");
    restore(trainer, c);
    fmt::print("resumed from {} at step {}\n", o.resume, trainer.steps_taken());
  }
  trainer.set_resident(0, std::move(train_tok));
  // Refuses to go on (and to save) once the loss is NaN or inf: that checkpoint is useless.
  auto check_loss = [&](double bits, const char* what) {
    if (!std::isfinite(bits))
      fail(
          "train lm: the {} is {} at step {} (diverged; try a lower --lr); no checkpoint "
          "written",
          what, bits, trainer.steps_taken());
  };
  auto save = [&] {
    check_loss(trainer.read_last().loss, "training loss");
    io::save_checkpoint(o.save, to_checkpoint(trainer, o.common.seed, trainer.steps_taken(), user));
    fmt::print("saved {} (step {})\n", o.save, trainer.steps_taken());
  };
  auto val_bpb = [&] {
    std::vector<Array> in{val_tok, starts};
    return trainer.run_eval(eval_id, in)[0].at(0) / std::log(2.0);
  };
  const int64_t first = trainer.steps_taken();
  Progress bar(first > 0 ? fmt::format("train lm (from step {})", first) : "train lm",
               o.steps - first);
  bar.set_value_name("loss (bits/byte)");
  double last = NAN;
  install_interrupt_handler();
  while (trainer.steps_taken() < o.steps) {
    int64_t s = trainer.steps_taken();
    std::vector<Array> in{lm::random_starts(o.common.seed, s, o.batch, ntrain, ctx)};
    if (dropout) in.push_back(lm::dropout_key(o.common.seed, s));
    trainer.step(std::move(in));
    if ((s + 1) % o.common.log_every == 0 || s + 1 == o.steps) {
      last = trainer.read_last().loss / std::log(2.0);
      check_loss(last, "training loss");
      bar.update(s + 1 - first, last);
    }
    if (o.save_every > 0 && (s + 1) % o.save_every == 0) save();
    if (interrupted()) {
      save();
      fmt::print("interrupted at step {}: continue with --resume {}\n", trainer.steps_taken(),
                 o.save);
      std::exit(130);  // as fmnist: the shell's code for a run stopped by SIGINT
    }
  }
  bar.finish(o.steps - first, last);
  double bpb = val_bpb();
  check_loss(bpb, "validation loss");
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
  cmd->add_option("--steps", o.steps, "training steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--batch", o.batch, "windows per step")->capture_default_str();
  cmd->add_option("--layers", o.model.layers, "transformer blocks")->capture_default_str();
  cmd->add_option("--d-model", o.model.d_model, "model width")->capture_default_str();
  cmd->add_option("--heads", o.model.heads, "query heads")->capture_default_str();
  cmd->add_option("--kv-heads", o.model.kv_heads, "key/value heads (GQA/MQA)")
      ->capture_default_str();
  cmd->add_option("--context", o.model.context, "context length (bytes)")->capture_default_str();
  cmd->add_option("--d-ff", o.model.d_ff, "MLP hidden width")->capture_default_str();
  cmd->add_flag("--tied", o.model.tied, "tie the head to the token embedding");
  cmd->add_option("--norm", o.model.norm, "layernorm | rmsnorm")
      ->capture_default_str()
      ->check(CLI::IsMember({"layernorm", "rmsnorm"}));
  cmd->add_option("--gelu", o.model.gelu, "GELU approximate: tanh | none (erf)")
      ->capture_default_str()
      ->check(CLI::IsMember({"tanh", "none"}));
  cmd->add_option("--dropout", o.model.dropout, "dropout p on embeddings and residual branches")
      ->capture_default_str();
  add_adamw_options(cmd, o.lr, o.wd);
  cmd->add_option("--save", o.save, "checkpoint path (safetensors)")->capture_default_str();
  cmd->add_option("--save-every", o.save_every, "also save every N steps (0: only at the end)");
  auto* resume = cmd->add_option("--resume", o.resume, "continue from this checkpoint");
  cmd->callback([resume] {
    o.resume_given = resume->count() > 0;
    run_lm(o);
  });
  add_export_recipe({"lm", "the benchmark LM's train step (2x128, 4 heads, ctx 16, AdamW)",
                     [] { return train::lm::bench_train_step().fn; }});
}

}  // namespace tlaloc::app

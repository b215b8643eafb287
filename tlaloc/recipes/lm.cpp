#include "tlaloc/recipes/lm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "tlaloc/distributed/communicator.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/hf_dir.h"
#include "tlaloc/nn/losses.h"
#include "tlaloc/random/program.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/finetune.h"
#include "tlaloc/recipes/generate.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/progress.h"

namespace tlaloc::recipes::lm {

using trace::Tensor;
using train::DataInput;
using train::Inputs;
using train::LossFn;

nn::CausalLMConfig bench_config() { return {}; }

optim::AdamW bench_optimizer() { return {.lr = 3e-3, .weight_decay = 0.01}; }

std::vector<DataInput> data_inputs(int64_t n_tokens, int64_t batch, bool dropout_key) {
  std::vector<DataInput> in{{"tokens", {DType::s32, Shape{n_tokens}}, true},
                            {"starts", {DType::s32, Shape{batch}}, false, true}};
  if (dropout_key) in.push_back({"dropout_key", {DType::u32, Shape{2}}, false});
  return in;
}

namespace {

// Mean next-token cross-entropy over the windows at `starts`; `key`: dropout on, that key bound.
std::vector<Tensor> window_loss(nn::Module& m, const Tensor& tokens, const Tensor& starts,
                                int64_t context, const std::optional<Tensor>& key) {
  const int64_t B = starts.dim(0);
  Tensor pos = trace::reshape(starts, {B, 1}) + trace::iota(Shape{1, context + 1}, 1);
  Tensor win = trace::take_rows(tokens, pos);  // [B, context + 1]
  Tensor x = trace::slice(win, 1, 0, context), y = trace::slice(win, 1, 1, context + 1);
  m.train(key.has_value());
  if (key) m.bind_key(*key);
  Tensor logits = m(x);
  Tensor flat = trace::reshape(logits, {B * context, logits.dim(2)});
  return {nn::cross_entropy(flat, trace::reshape(y, {B * context}))};
}

}  // namespace

LossFn loss_fn(int64_t context) {
  return [context](nn::Module& m, const Inputs& d) {
    std::optional<Tensor> key;
    if (d.contains("dropout_key")) key = d["dropout_key"];
    return window_loss(m, d["tokens"], d["starts"], context, key);
  };
}

std::vector<DataInput> sampled_inputs(int64_t n_tokens, int procs) {
  if (procs == 0) procs = distributed::world_size();
  std::vector<DataInput> in = {{"tokens", {DType::s32, Shape{n_tokens}}, true},
                               {"step", {DType::s32, Shape{}}, false, false, true}};
  if (procs > 1) in.push_back({"rank", {DType::s32, Shape{}}, true});
  return in;
}

LossFn sampled_loss_fn(int64_t context, uint64_t seed, int64_t batch, int64_t n_tokens,
                       bool dropout, int procs) {
  if (procs == 0) procs = distributed::world_size();
  if (batch < 1 || batch % procs)
    fail("lm: a batch of {} windows does not split over {} processes", batch, procs);
  if (n_tokens <= context)
    fail("lm: {} tokens are too few for windows of {} + 1", n_tokens, context);
  return [=](nn::Module& m, const Inputs& d) {
    const Tensor& step = d["step"];
    // random_starts and dropout_key, in the program (LmSampled checks the bits).
    Tensor starts = random::randint(random::fold_in(random::key_constant(random::key(seed)), step),
                                    Shape{batch}, 0, n_tokens - context);
    const int64_t rows = batch / procs;
    if (procs > 1)  // this process's rows, at its "rank"
      starts = trace::dynamic_slice(starts, {d["rank"] * trace::scalar(double(rows), DType::s32)},
                                    {rows});
    std::optional<Tensor> key;
    if (dropout) {
      key = random::fold_in(random::key_constant(random::split(random::key(seed), 2)[1]), step);
      if (procs > 1) key = random::fold_in(*key, trace::astype(d["rank"], DType::u32));
    }
    return window_loss(m, d["tokens"], starts, context, key);
  };
}

optim::TrainStep bench_train_step(int64_t n_tokens, uint64_t seed, int replicas, DType precision,
                                  bool flat_state) {
  if (replicas < 1 || kBenchBatch % replicas)
    fail("lm: the benchmark batch of {} does not split over {} replicas", kBenchBatch, replicas);
  nn::CausalLM model(bench_config());
  model.init(random::key(seed));
  optim::UpdateOptions u;
  u.replicas = replicas;
  u.flat_state = flat_state;
  const int64_t ctx = model.config().context;
  return train::build_train_step(model,
                                 sampled_loss_fn(ctx, 1, kBenchBatch, n_tokens, false, replicas),
                                 sampled_inputs(n_tokens, replicas), bench_optimizer(), u, nullptr,
                                 nullptr, nullptr, precision);
}

Array read_corpus(const std::vector<std::string>& files) {
  std::vector<int32_t> tok;
  for (const auto& f : files) {
    std::error_code ec;
    if (std::filesystem::is_directory(f, ec))
      fail("lm: text file {} is a directory (pass its files)", f);
    if (std::filesystem::is_character_file(f, ec) || std::filesystem::is_block_file(f, ec))
      fail("lm: text file {} is a device, not a file (it may never end)", f);
    std::ifstream in(f, std::ios::binary);
    if (!in) fail("lm: cannot read text file {}", f);
    std::vector<char> bytes;
    try {
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } catch (const std::ios_base::failure& e) {
      fail("lm: cannot read text file {}: {}", f, e.what());
    }
    for (char c : bytes) tok.push_back(int32_t(static_cast<unsigned char>(c)));
  }
  if (tok.empty()) fail("lm: the corpus ({} files) is empty", files.size());
  return Array::from(Shape{int64_t(tok.size())}, tok);
}

std::vector<std::string> default_corpus(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;  // symlinks to off/ and subfolders are skipped
    std::string ext = e.path().extension().string();
    if (ext == ".dat" || ext == ".u8") continue;
    out.push_back(e.path().string());
  }
  if (ec || out.empty())
    fail("lm: no fortunes text files in {} (install Debian's fortunes package or pass --text)",
         dir);
  std::sort(out.begin(), out.end());
  return out;
}

double unigram_bits_per_byte(const Array& train, const Array& eval) {
  std::vector<double> count(256, 1.0);
  const int32_t* t = train.data<int32_t>();
  for (int64_t i = 0; i < train.numel(); ++i) count[size_t(t[i])] += 1;
  double total = double(train.numel()) + 256.0, bits = 0;
  const int32_t* e = eval.data<int32_t>();
  for (int64_t i = 0; i < eval.numel(); ++i) bits -= std::log2(count[size_t(e[i])] / total);
  return bits / double(eval.numel());
}

double parameter_count(const nn::CausalLMConfig& c) {
  if (c.vocab <= 0 || c.context <= 0 || c.d_model <= 0 || c.layers <= 0 || c.heads <= 0 ||
      c.kv_heads <= 0 || c.d_ff <= 0)
    return 0;
  const double d = double(c.d_model), ff = double(c.d_ff), v = double(c.vocab);
  const double kv = double(c.kv_heads) * d / double(c.heads);  // k / v projection outputs
  const double norm = c.norm == "rmsnorm" ? d : 2 * d;
  const double block =
      2 * norm + (d * d + d) * 2 + (d * kv + kv) * 2 + (d * ff + ff) + (ff * d + d);
  return v * d + double(c.context) * d + double(c.layers) * block + norm + (c.tied ? 0 : v * d);
}

void check_fits_in_memory(const nn::CausalLMConfig& c, double bytes_per_parameter,
                          const std::string& what) {
  recipes::check_fits_in_memory(parameter_count(c), bytes_per_parameter, what);
}

Array dropout_key(uint64_t seed, int64_t step) {
  random::Key k = random::fold_in(random::split(random::key(seed), 2)[1], uint32_t(step));
  // Data parallelism: each process drops its own units (fold_in(rank)).
  if (distributed::world_size() > 1) k = random::fold_in(k, uint32_t(distributed::rank()));
  return random::key_data(k);
}

Array random_starts(uint64_t seed, int64_t step, int64_t count, int64_t n_tokens, int64_t context) {
  random::Key k = random::fold_in(random::key(seed), uint32_t(step));
  return random::randint(k, Shape{count}, 0, n_tokens - context);
}

namespace {

Array tokens_range(const Array& t, int64_t begin, int64_t end) {
  Array out(DType::s32, Shape{end - begin});
  std::memcpy(out.raw(), t.data<int32_t>() + begin, size_t(end - begin) * 4);
  return out;
}

// Checked before the corpus is read or anything is compiled, so a typo fails at once.
void check_config(const Config& c) {
  if (c.batch < 1) fail("train lm: --batch {} must be >= 1", c.batch);
  if (c.batch % distributed::world_size())
    fail("train lm: --batch {} does not split over {} processes", c.batch,
         distributed::world_size());
  const auto& m = c.model;
  if (m.heads < 1) fail("train lm: --heads {} must be >= 1", m.heads);
  if (m.kv_heads < 1) fail("train lm: --kv-heads {} must be >= 1", m.kv_heads);
  if (m.d_model % m.heads != 0 || m.heads % m.kv_heads != 0)
    fail(
        "train lm: --d-model {} must be a multiple of --heads {}, itself a multiple of --kv-heads "
        "{} (MHA: equal, GQA: a divisor, MQA: 1)",
        m.d_model, m.heads, m.kv_heads);
  if (!(m.dropout >= 0 && m.dropout < 1))
    fail("train lm: --dropout {} must be in [0, 1) (1 zeroes every activation)", m.dropout);
  // Parameters, gradients and AdamW's two moments: 4 f32 per parameter.
  check_fits_in_memory(m, 16, "train lm");
  if (c.common.lane == train::Lane::host)  // pjrt: the activations are the device's
    check_step_fits_in_memory(c.batch, m.context, m.vocab, m.layers, m.d_model, m.d_ff,
                              c.common.precision, "train lm");
}

}  // namespace

train::FitResult run(const Config& c) {
  std::FILE* out = c.common.out;
  const std::string& what = c.name;
  const bool finetune = c.lora || !c.freeze.empty();
  if (finetune && c.init.empty()) fail("{}: fine-tuning needs the checkpoint to start from", what);
  if (c.lora && !c.freeze.empty())
    fail("{}: --freeze with --lora: LoRA freezes the whole base model already", what);
  // The model: --init's (its sizes), else c.model.
  std::optional<io::Checkpoint> base;
  Config cc = c;
  if (!c.init.empty()) {
    try {
      base = io::load_checkpoint(c.init);
      cc.model = config_from_checkpoint(*base);
    } catch (const Error& e) {
      fail("{}: {} is neither a Llama model directory nor a `train lm` checkpoint: {}", what,
           c.init, e.what());
    }
  }
  check_config(cc);
  const nn::CausalLMConfig& mc = cc.model;
  nn::CausalLM model(mc);
  const train::Trainer* trainer_of_run = nullptr;  // set once made: the frozen tensors' source
  std::optional<train::FitOptions::CheckpointFormat> format;
  if (c.lora) {
    io::PeftLoraConfig p{
        .r = c.lora->r,
        .lora_alpha = c.lora->lora_alpha,
        .lora_dropout = c.lora->lora_dropout,
        .use_rslora = c.lora->use_rslora,
        .target_modules = c.lora->target_modules,
        .base_model_name_or_path = std::filesystem::absolute(c.init).lexically_normal().string()};
    format = lora_format(p, what);
  } else if (!c.freeze.empty()) {
    format = single_file_format();
    frozen_format(model, fmt::format("{}", fmt::join(c.freeze, ",")), *format, trainer_of_run);
  }
  std::map<std::string, std::string> fields = {{"recipe", "lm"},
                                               {"layers", std::to_string(mc.layers)},
                                               {"d_model", std::to_string(mc.d_model)},
                                               {"heads", std::to_string(mc.heads)},
                                               {"kv_heads", std::to_string(mc.kv_heads)},
                                               {"context", std::to_string(mc.context)},
                                               {"d_ff", std::to_string(mc.d_ff)},
                                               {"tied", mc.tied ? "true" : "false"},
                                               {"norm", mc.norm},
                                               {"gelu", mc.gelu},
                                               {"dropout", io::exact(mc.dropout)},
                                               {"batch", std::to_string(c.batch)}};
  if (base) {
    std::vector<io::TensorRef> refs;
    for (const auto& [n, a] : base->params) refs.push_back(io::tensor_ref(n, a));
    fields["base_model"] = io::tensors_digest(refs);
  }
  if (!c.freeze.empty()) {
    std::string pats;
    for (const auto& q : c.freeze) pats += (pats.empty() ? "" : ",") + q;
    fields["freeze"] = pats;
  }
  if (c.lora)
    fields["lora"] = fmt::format("r={},alpha={},dropout={},rslora={},targets={}", c.lora->r,
                                 io::exact(c.lora->lora_alpha), io::exact(c.lora->lora_dropout),
                                 c.lora->use_rslora, fmt::join(c.lora->target_modules, ","));
  train::FitOptions f = fit_options(c.common, what, c.steps, std::move(fields));
  f.splits_in_program = true;  // sampled_loss_fn
  if (format) f.format = std::move(*format);
  train::check(f);
  const io::WriteLock lock = train::lock_outputs(f);
  if (base && c.common.save && std::filesystem::exists(*c.common.save) &&
      std::filesystem::equivalent(*c.common.save, c.init))
    fail("{}: --save {} is the checkpoint it starts from: write to a file of its own", what,
         *c.common.save);
  const optim::Schedule schedule = make_schedule(c.common, what, c.steps, c.common.warmup);
  train::TrainerOptions topt = trainer_options(c.common);  // fails before any work
  topt.schedule = schedule;
  auto files = c.text.empty() ? default_corpus() : c.text;
  Array all = read_corpus(files);
  const int64_t n = all.numel(), ctx = mc.context;
  const int64_t nval = int64_t(double(n) * c.val_fraction), ntrain = n - nval;
  if (ntrain <= ctx + 1 || nval <= ctx + 1)
    fail("train lm: {} bytes are too few for context {} and a {} validation split", n, ctx,
         c.val_fraction);
  Array train_tok = tokens_range(all, 0, ntrain), val_tok = tokens_range(all, ntrain, n);
  {  // a resume on other text is refused (train::check_resume_fields), as train llama's is
    std::string bytes(size_t(n), '\0');
    for (int64_t i = 0; i < n; ++i) bytes[size_t(i)] = char(all.data<int32_t>()[i]);
    f.metadata["text_digest"] = bytes_digest(bytes);
  }
  fmt::print(out, "corpus: {} files, {} bytes ({} train, {} validation)\n", files.size(), n, ntrain,
             nval);
  model.init(random::key(c.common.seed));
  if (base) {
    train::restore_model(model, *base);
    train::require_finite(base->params, c.init, "parameter");
  }
  try {
    if (!c.freeze.empty()) nn::freeze(model, c.freeze);
    if (c.lora)
      nn::add_lora(model, *c.lora, random::fold_in(random::key(c.common.seed), kLoraStream));
  } catch (const Error& e) {
    fail("{}: {}", what, e.what());
  }
  fmt::print(out, "{}\nparameters: {}{}\n", model.to_string(), model.num_parameters(),
             finetune ? trained_text(model) : "");
  const bool dropout = mc.dropout > 0 || (c.lora && c.lora->lora_dropout > 0);
  std::optional<train::Activity> compiling(std::in_place, "compiling the train step", out);
  std::optional<train::Trainer> made;
  naming_step_size(what, c.batch, ctx, [&] {
    made.emplace(model, sampled_loss_fn(ctx, c.common.seed, c.batch, ntrain, dropout),
                 sampled_inputs(ntrain), optim::AdamW{.lr = c.lr, .weight_decay = c.wd}, topt);
  });
  train::Trainer& trainer = *made;
  compiling.reset();
  fmt::print(out, "IR: forward {} ops, gradient {} ops, train step (with AdamW) {} ops\n",
             trainer.forward_ops(), trainer.gradient_ops(), trainer.step_function().num_ops());
  const int64_t nw = std::min(c.val_windows, nval - ctx - 1);
  // Validation in equal chunks of at most kEvalTokens tokens (the largest divisor of nw that
  // fits), so its activations stay near a train step's: one chunk for small models.
  constexpr int64_t kEvalTokens = 16384;
  int64_t chunk = nw;
  while (chunk > 1 && (chunk * ctx > kEvalTokens || nw % chunk != 0)) --chunk;
  int eval_id = trainer.add_eval(loss_fn(ctx), {{"tokens", {DType::s32, Shape{nval}}},
                                                {"starts", {DType::s32, Shape{chunk}}}});
  std::vector<Array> starts;  // one per chunk
  for (int64_t i0 = 0; i0 < nw; i0 += chunk) {
    Array& s = starts.emplace_back(DType::s32, Shape{chunk});
    for (int64_t i = i0; i < i0 + chunk; ++i)
      s.data<int32_t>()[i - i0] = int32_t(i * (nval - ctx - 1) / std::max<int64_t>(nw, 1));
  }
  trainer.set_resident("tokens", std::move(train_tok));
  if (distributed::world_size() > 1)
    trainer.set_resident("rank", Array::scalar<int32_t>(distributed::rank()));
  trainer_of_run = &trainer;

  f.progress_value = "loss (bits/byte)";
  f.progress_unit = std::log(2.0);
  f.progress_mean = false;
  train::FitCallbacks cb;
  double val_nats = NAN;  // the validation loss in nats per byte: the metrics' final row
  cb.on_end = [&](int64_t, double) {
    double bpb = 0;
    {  // a large model's validation takes a while after the bar's "ETA 0.0s"
      train::Activity a(fmt::format("validation on {} windows of {} bytes", nw, ctx), out);
      // The chunks' mean losses, averaged (equal chunks). Under data parallelism process r
      // scores chunks r, r + N, ...; a sum over the processes (x + 0 is x) gives every process
      // every chunk's loss, added up in chunk order as one process does.
      const int procs = distributed::world_size();
      std::vector<double> chunk_nats(starts.size(), 0.0);
      for (size_t k = 0; k < starts.size(); ++k) {
        if (int(k % size_t(procs)) != distributed::rank()) continue;
        train::Batch in{{"tokens", val_tok}, {"starts", starts[k]}};
        chunk_nats[k] = trainer.run_eval(eval_id, in)[0].at(0);
      }
      if (procs > 1)
        distributed::world().all_reduce(chunk_nats.data(), int64_t(chunk_nats.size()), DType::f64,
                                        distributed::Reduction::sum);
      double nats = 0;
      for (double x : chunk_nats) nats += x;
      val_nats = nats / double(starts.size());
      bpb = val_nats / std::log(2.0);
    }
    if (!std::isfinite(bpb))
      fail(
          "{}: the validation loss is {} at step {} (diverged; try a lower --lr); no checkpoint "
          "written",
          what, bpb, trainer.steps_taken());
    fmt::print(out,
               "validation: {:.4f} bits/byte (model)  vs  {:.4f} bits/byte (unigram baseline)\n",
               bpb, unigram_bits_per_byte(all, val_tok));
  };
  cb.final_metrics = [&] { return train::Metrics{{"val_loss", val_nats}}; };
  return naming_step_size(what, c.batch, ctx, [&] { return train::fit(trainer, f, cb); });
}

train::StepBenchCase bench_case(int threads) {
  train::StepBenchCase c;
  const int64_t n = 4096, ctx = bench_config().context;
  c.title = fmt::format(
      "benchmark LM step (2 layers, d_model 128, 4 heads, MLP 512 GELU, ctx 16, batch 4x16, "
      "AdamW in the program; {} parameters)",
      nn::CausalLM(bench_config()).num_parameters());
  c.make_model = [] {
    auto m = std::make_shared<nn::CausalLM>(bench_config());
    m->init(random::key(20260921));
    return std::shared_ptr<nn::Module>(m);
  };
  c.loss = sampled_loss_fn(ctx, 1, kBenchBatch, n, false);
  c.data = sampled_inputs(n);
  c.resident = {{"tokens", random::randint(random::key(7), Shape{n}, 0, 256)}};
  c.opt = bench_optimizer();
  c.num_threads = threads;
  return c;
}

}  // namespace tlaloc::recipes::lm

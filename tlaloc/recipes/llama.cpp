#include "tlaloc/recipes/llama.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tlaloc/distributed/communicator.h"
#include "tlaloc/io/atomic_dir.h"
#include "tlaloc/io/atomic_file.h"
#include "tlaloc/io/json_util.h"
#include "tlaloc/random/random.h"
#include "tlaloc/recipes/llama_finetune.h"
#include "tlaloc/recipes/lm.h"
#include "tlaloc/train/checkpointing.h"
#include "tlaloc/train/progress.h"

namespace tlaloc::recipes::llama {

using nlohmann::json;
using nn::models::LlamaConfig;
using nn::models::LlamaForCausalLM;

double parameter_count(const LlamaConfig& m) {
  const double h = double(m.hidden_size), q = double(m.num_attention_heads * m.head_size());
  const double kv = double(m.kv_heads() * m.head_size()), f = double(m.intermediate_size);
  const double layer = h * q * 2 + h * kv * 2 + 3 * h * f + 2 * h +
                       (m.attention_bias ? q + 2 * kv + h : 0) + (m.mlp_bias ? 2 * f + h : 0);
  return double(m.vocab_size) * h * (m.tie_word_embeddings ? 1 : 2) +
         double(m.num_hidden_layers) * layer + h;
}

namespace {

constexpr const char* kWhat = "train llama";

// A private folder under $TMPDIR (or /tmp) of files only, removed with them: by its destructor,
// or by io::remove_live_temporaries() when a signal ends the process.
class TempDir {
 public:
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/tlaloc-llama-XXXXXX";
    if (!::mkdtemp(tmpl.data())) fail("{}: cannot create a folder in {}", kWhat, tmpl);
    path_ = tmpl;
    slot_ = io::detail::register_live(path_, true);
  }
  ~TempDir() {
    io::detail::unregister_live(slot_);
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
  int slot_ = -1;
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream o(path, std::ios::binary);
  o.write(bytes.data(), std::streamsize(bytes.size()));
  if (!o.flush()) fail("{}: cannot write {}", kWhat, path);
}

std::string describe(const io::TensorView& v) {
  return fmt::format("{} {}", v.dtype_name(), to_string(Shape(v.shape)));
}

// Whether a stored tensor of dtype `have` loads into a parameter of dtype `want`: the same
// dtype, BF16 / F16 widened to F32 (HF checkpoints are mostly BF16), or F64 rounded to F32 (as
// PyTorch's load_state_dict copies into a float32 model).
bool loads_into(io::StDType have, DType want) {
  return have == io::from_tlaloc(want) ||
         (want == DType::f32 &&
          (have == io::StDType::BF16 || have == io::StDType::F16 || have == io::StDType::F64));
}

// Tensors a Llama directory may hold beside the model's parameters, as HF's loading skips them:
// the RoPE frequencies older transformers saved as a buffer (`rotary_emb.inv_freq`, which HF
// ignores on load and tlaloc computes from the config), and, with tie_word_embeddings, an
// lm_head.weight equal to embed_tokens (HF ties it to the embedding).
bool skipped_on_load(const std::string& name, const LlamaConfig& cfg) {
  const std::string buffer = "rotary_emb.inv_freq";
  return (name.size() >= buffer.size() &&
          name.compare(name.size() - buffer.size(), buffer.size(), buffer) == 0) ||
         (cfg.tie_word_embeddings && name == "lm_head.weight");
}

// The model's parameters from `src`'s tensors, strictly: each one present with the parameter's
// shape and dtype (or one that loads into it), nothing else there but what HF skips too. One
// line per refusal, naming `what` and the tensor.
void restore_strict(LlamaForCausalLM& model, const io::HfModelDir& src, const std::string& what) {
  auto named = model.named_parameters();
  for (auto& p : named) {
    const io::TensorView* v = src.find(p.name);
    if (!v) fail("{}: tensor '{}' of the model is missing from {}", what, p.name, src.path());
    const DType want = p.param->value.dtype();
    if (!loads_into(v->dtype, want) || Shape(v->shape) != p.param->value.shape())
      fail("{}: tensor '{}' ({}) is {}, the model's is {} {}", what, p.name, src.file_of(p.name),
           describe(*v), io::st_name(io::from_tlaloc(want)), to_string(p.param->value.shape()));
  }
  std::map<std::string, DType> want;  // the parameters' names and dtypes
  for (auto& p : named) want[p.name] = p.param->value.dtype();
  for (const auto& v : src.tensors())
    if (!want.count(v.name) && !skipped_on_load(v.name, model.config()))
      fail("{}: tensor '{}' ({}) is not a parameter of the model (the config's)", what, v.name,
           src.file_of(v.name));
  io::Checkpoint c = io::load_hf_checkpoint(src, false);
  const Array* embed = nullptr;
  for (auto& [name, a] : c.params)
    if (name == "model.embed_tokens.weight") embed = &a;
  for (auto& [name, a] : c.params)
    if (name == "lm_head.weight" && !want.count(name) &&
        !(embed && a.shape() == embed->shape() &&
          a.astype(DType::f32).bitwise_equal(embed->astype(DType::f32))))
      fail(
          "{}: tensor 'lm_head.weight' ({}) differs from model.embed_tokens.weight, which the "
          "config ties it to (tie_word_embeddings)",
          what, src.file_of(name));
  std::erase_if(c.params, [&](auto& t) { return !want.count(t.first); });
  for (auto& [name, a] : c.params)  // rounded to F32, a finite F64 past its range would be inf
    if (a.dtype() == DType::f64 && want.at(name) == DType::f32 &&
        std::any_of(a.data<double>(), a.data<double>() + a.numel(),
                    [](double v) { return std::isfinite(v) && std::fabs(v) > FLT_MAX; }))
      fail(
          "{}: tensor '{}' ({}) holds F64 values beyond F32's range (|x| > {:.4g}), the model's "
          "dtype",
          what, name, src.file_of(name), double(FLT_MAX));
  for (auto& [name, a] : c.params)
    if (a.dtype() != want.at(name)) a = a.astype(want.at(name));
  train::restore_model(model, c);
  train::require_finite(c.params, src.path(), "parameter");
}

void check_vocab(const text::Tokenizer& tok, const LlamaConfig& m, const std::string& what) {
  if (tok.vocab_size() > m.vocab_size)
    fail("{}: tokenizer {} has {} pieces, more than the model's vocab_size {}", what, tok.name(),
         tok.vocab_size(), m.vocab_size);
  // config.json's ids are what HF's generate uses: they must be the tokenizer's.
  if (m.bos_token_id && tok.bos_id() >= 0 && *m.bos_token_id != tok.bos_id())
    fail("{}: the model's bos_token_id is {}, tokenizer {}'s <s> is {}", what, *m.bos_token_id,
         tok.name(), tok.bos_id());
  if (tok.eos_id() >= 0 && !m.eos_token_id.empty() &&
      std::find(m.eos_token_id.begin(), m.eos_token_id.end(), tok.eos_id()) == m.eos_token_id.end())
    fail("{}: the model's eos_token_id is {}, tokenizer {}'s </s> is {}", what,
         fmt::join(m.eos_token_id, ", "), tok.name(), tok.eos_id());
}

// The run's text as its metadata field: "default", or a JSON array of absolute paths.
std::string text_field(const std::vector<std::string>& files) {
  if (files.empty()) return "default";
  json a = json::array();
  for (const auto& f : files) a.push_back(std::filesystem::absolute(f).lexically_normal().string());
  return a.dump();
}

// Throws "<what>: a model of N parameters needs about X GiB ..." when `bytes` per parameter
// exceed this machine's memory, so such a config fails at once, not in the OOM killer.
void check_memory(const LlamaConfig& m, double bytes, const std::string& what) {
  recipes::check_fits_in_memory(parameter_count(m), bytes, what);
}

struct Model {
  LlamaConfig config;
  std::string label;  // "preset tiny", "config.json X", "--init DIR"
  int64_t context = 0, batch = 0;
  std::optional<io::HfModelDir> init;
};

Model choose_model(const Config& c) {
  const int given = !c.preset.empty() + !c.config_json.empty() + !c.init.empty();
  if (given > 1) fail("{}: --preset, --config and --init exclude each other (one model)", c.name);
  Model m;
  Preset small = preset("small");
  m.context = small.context;
  m.batch = small.batch;
  if (!c.config_json.empty()) {
    const std::string text = text::read_text_file(c.config_json, "train llama: --config");
    m.config = nn::models::llama_config_from_json(
        io::parse_json_strict(text, c.config_json, "config", 64), c.config_json);
    m.label = "config " + c.config_json;
  } else if (!c.init.empty()) {
    m.init.emplace(io::HfModelDir::open(c.init));
    m.config = nn::models::llama_config_from_json(m.init->config(), c.init + "/config.json");
    m.label = "--init " + c.init;
  } else {
    Preset p = preset(c.preset.empty() ? "tiny" : c.preset);
    m.config = p.model;
    m.context = p.context;
    m.batch = p.batch;
    m.label = "preset " + p.name;
  }
  const int64_t max_pos = m.config.max_position_embeddings;
  if (c.context && *c.context > max_pos)
    fail("{}: --context {} is more than the model's max_position_embeddings {}", c.name, *c.context,
         max_pos);
  m.context = c.context.value_or(std::min(m.context, max_pos));
  m.batch = c.batch.value_or(m.batch);
  if (m.context < 1) fail("{}: --context {} must be >= 1", c.name, m.context);
  if (m.batch < 1) fail("{}: --batch {} must be >= 1", c.name, m.batch);
  if (m.batch % distributed::world_size())
    fail("{}: a batch of {} (--batch) does not split over {} processes", c.name, m.batch,
         distributed::world_size());
  // Parameters, gradients and AdamW's two moments: 4 f32 per parameter.
  check_memory(m.config, 16, c.name);
  if (c.common.lane == train::Lane::host)  // pjrt: the activations are the device's
    check_step_fits_in_memory(m.batch, m.context, m.config.vocab_size, m.config.num_hidden_layers,
                              m.config.hidden_size, m.config.intermediate_size, c.common.precision,
                              c.name);
  return m;
}

json generation_config(const LlamaConfig& m) {
  json g = {{"_from_model_config", true}};
  if (m.bos_token_id) g["bos_token_id"] = *m.bos_token_id;
  if (m.eos_token_id.size() == 1 && !m.eos_token_id_list)
    g["eos_token_id"] = m.eos_token_id[0];
  else
    g["eos_token_id"] = m.eos_token_id;
  if (m.pad_token_id) g["pad_token_id"] = *m.pad_token_id;
  return g;
}

}  // namespace

int64_t field_int(const io::Checkpoint& c, const std::string& key, const std::string& where) {
  auto it = c.user.find(key);
  int64_t v = 0;
  if (it == c.user.end()) fail("{}: the training state has no field '{}'", where, key);
  auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (ec != std::errc() || end != it->second.data() + it->second.size() || v <= 0)
    fail("{}: the training state's field '{}' is '{}', not a positive integer", where, key,
         it->second);
  return v;
}

train::FitResult run(const Config& c) {
  std::FILE* out = c.common.out;
  const std::string& what = c.name;
  const bool finetune = c.lora || !c.freeze.empty();
  if (finetune && c.init.empty())
    fail("{}: fine-tuning needs the model to start from (--init DIR)", what);
  if (c.lora && !c.freeze.empty())
    fail("{}: --freeze with --lora: LoRA freezes the whole base model already", what);
  if (!(c.val_fraction > 0 && c.val_fraction < 1))
    fail("{}: the validation fraction {} must be in (0, 1)", what, c.val_fraction);
  Model m = choose_model(c);
  m.config.torch_dtype = "float32";  // the dtype of the weights written (BF16 --init widens)
  const LlamaConfig& cfg = m.config;
  const json config_json = nn::models::to_json(cfg);
  const int64_t ctx = m.context;
  // Folder names without trailing slashes: the lock file and the training state go beside them.
  const std::string dir = io::folder_name(
      c.common.save.value_or(c.lora ? "llama-lora"
                             : c.preset.empty() && (c.config_json.size() || c.init.size())
                                 ? "llama-model"
                                 : "llama-" + (c.preset.empty() ? std::string("tiny") : c.preset)),
      what + ": --save");
  if (!c.init.empty()) {
    std::error_code ec;
    if (std::filesystem::exists(dir, ec) && std::filesystem::equivalent(dir, c.init, ec))
      fail("{}: --save {} is the model directory it starts from: write to a folder of its own",
           what, dir);
  }
  const optim::Schedule schedule = make_schedule(c.common, what, c.steps, c.common.warmup);

  // The checkpoint: the model directory and its training state beside it.
  TempDir tmp;
  const std::string tok_file = tmp.file("tokenizer.model");
  Common common = c.common;
  common.save = dir;
  if (common.resume) common.resume = io::folder_name(*common.resume, what + ": --resume");
  std::map<std::string, std::string> fields = {{"recipe", "llama"},
                                               {"context", std::to_string(ctx)},
                                               {"batch", std::to_string(m.batch)},
                                               {"text", text_field(c.text)},
                                               {"val_fraction", io::exact(c.val_fraction)}};
  if (finetune) add_finetune_fields(c, *m.init, fields);
  train::FitOptions f = fit_options(common, what, c.steps, std::move(fields));
  f.splits_in_program = true;  // lm::sampled_loss_fn
  io::HfSaveOptions save_opt;
  save_opt.what = "train llama: --save";
  save_opt.files = {{"tokenizer.model", tok_file}};
  // HF's files of another tokenizer would disagree with the tokenizer.model written here.
  save_opt.dropped = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                      "added_tokens.json"};
  save_opt.generation_config = generation_config(cfg);
  train::FitOptions::CheckpointFormat format;
  format.folder = true;
  format.check_output = [](const std::string& path, const std::string& what) {
    io::check_output_model_dir(path, what);
    io::check_output_file(io::training_state_path(path), what, io::OutputMode::replace);
  };
  format.save = [&](const std::string& path, const io::Checkpoint& ck) {
    io::save_hf_checkpoint(path, config_json, ck, save_opt);
  };
  format.load = [&](const std::string& path) {
    io::HfModelDir d = io::HfModelDir::open(path);
    if (d.config() != config_json)
      fail("--resume {}: its config.json is not this run's model ({})", path, m.label);
    io::require_training_state(path, "to train on from its weights, give it with --init");
    return io::load_hf_checkpoint(d, true);
  };
  LlamaForCausalLM model(cfg);
  const train::Trainer* trainer_of_run = nullptr;  // set once made: the frozen tensors' source
  if (c.lora) format = lora_format(c);
  if (!c.freeze.empty())
    frozen_format(model, fmt::format("{}", fmt::join(c.freeze, ",")), format, trainer_of_run);
  f.format = std::move(format);
  train::check(f);
  const io::WriteLock lock = train::lock_outputs(f);
  model.init(random::key(c.common.seed));
  if (m.init) restore_strict(model, *m.init, what + ": --init " + c.init);
  if (finetune) prepare_finetune(c, model);

  // The tokenizer: given, the --init or --resume directory's, or trained below.
  std::optional<text::Tokenizer> tok;
  if (!c.tokenizer.empty()) {
    tok.emplace(text::Tokenizer::load(c.tokenizer));
  } else if (m.init && m.init->tokenizer_model()) {
    tok.emplace(text::Tokenizer::load(*m.init->tokenizer_model()));
  } else if (c.common.resume) {
    tok.emplace(text::Tokenizer::load(*c.common.resume));
  }
  if (tok) check_vocab(*tok, cfg, what);
  // Pretrained embeddings stand for their own tokenizer's pieces: a new one would scramble them.
  if (m.init && !tok)
    fail("{}: the model directory {} has no tokenizer.model: give its tokenizer with --tokenizer",
         what, c.init);
  if (tok && c.common.resume && !c.lora) {  // an adapter's tokenizer is its base model's
    const std::string theirs = text::Tokenizer::load(*c.common.resume).bytes();
    if (tok->bytes() != theirs)
      fail("{}: the tokenizer {} is not the tokenizer.model of --resume {}", what, tok->name(),
           *c.common.resume);
  }

  train::TrainerOptions topt = trainer_options(c.common);  // prints the lane's line
  topt.schedule = schedule;

  const std::vector<Document> docs = c.text.empty() ? default_documents() : read_documents(c.text);
  Split split = split_documents(docs, c.val_fraction);
  const int64_t train_bytes = total_bytes(split.train), val_bytes = total_bytes(split.held_out);
  fmt::print(out, "text: {} document{}, {} bytes ({} train, {} held out)\n", docs.size(),
             docs.size() == 1 ? "" : "s", train_bytes + val_bytes, train_bytes, val_bytes);
  const bool trained = !tok;
  if (trained) {
    const std::string text_file = tmp.file("train.txt");
    {
      std::string all;
      for (const auto& d : split.train) {
        all += d.text;
        if (!all.empty() && all.back() != '\n') all += '\n';
      }
      write_file(text_file, all);
    }
    train::Activity a(fmt::format("training a BPE tokenizer of {} pieces", cfg.vocab_size), out);
    try {
      tok.emplace(text::train({text_file}, {.vocab_size = int32_t(cfg.vocab_size)}));
    } catch (const Error& e) {
      fail(
          "{}: no --tokenizer given, and training one of the model's vocab_size {} on the {} "
          "training bytes failed: {}",
          what, cfg.vocab_size, train_bytes, e.what());
    }
    check_vocab(*tok, cfg, what);  // its <s> 1 and </s> 2 against config.json's ids
  }
  write_file(tok_file, tok->bytes());
  // What the run trained on, so a resume or `eval` can tell when the text or the directory's
  // tokenizer.model changed since.
  f.metadata["text_digest"] = text_digest(docs);
  f.metadata["tokenizer_digest"] = bytes_digest(tok->bytes());
  Array train_tok = encode_stream(*tok, split.train);
  const Array val_tok = encode_stream(*tok, split.held_out);
  const int64_t ntrain = train_tok.numel();
  fmt::print(out, "tokenizer: {} ({} pieces): {} train tokens, {} held-out tokens\n",
             trained ? std::string("BPE trained on the training text") : tok->name(),
             tok->vocab_size(), ntrain, val_tok.numel());
  if (ntrain <= ctx + 1)
    fail("{}: {} training tokens are too few for context {}; pass more text", what, ntrain, ctx);
  fmt::print(out, "model ({}): {} parameters{}, context {}, batch {}\n", m.label,
             model.num_parameters(), finetune ? trained_text(model) : "", ctx, m.batch);
  const bool dropout = c.lora && c.lora->lora_dropout > 0;  // a fresh key every step

  std::optional<train::Activity> compiling(std::in_place, "compiling the train step", out);
  std::optional<train::Trainer> made;
  naming_step_size(what, m.batch, ctx, [&] {
    made.emplace(model, lm::sampled_loss_fn(ctx, c.common.seed, m.batch, ntrain, dropout),
                 lm::sampled_inputs(ntrain), optim::AdamW{.lr = c.lr, .weight_decay = c.wd}, topt);
  });
  train::Trainer& trainer = *made;
  trainer_of_run = &trainer;
  compiling.reset();
  fmt::print(out, "IR: forward {} ops, gradient {} ops, train step (with AdamW) {} ops\n",
             trainer.forward_ops(), trainer.gradient_ops(), trainer.step_function().num_ops());
  const TextScore unigram = unigram_score(train_tok, tok->vocab_size(), val_tok, val_bytes);
  if (finetune && !c.common.resume) {  // the starting point, on the same held-out text
    TextScore s;
    {
      train::Activity a(
          fmt::format("validation before fine-tuning on {} held-out tokens", val_tok.numel()), out);
      s = score_stream(model, val_tok, ctx, val_bytes, c.common.threads);
    }
    fmt::print(out, "before fine-tuning: {}\n", format_score(s));
  }
  trainer.set_resident("tokens", std::move(train_tok));
  if (distributed::world_size() > 1)
    trainer.set_resident("rank", Array::scalar<int32_t>(distributed::rank()));

  f.progress_value = "loss (nats/token)";
  f.progress_mean = false;
  train::FitCallbacks cb;
  double val_nats = NAN;  // nats per held-out token: the metrics' final row
  cb.on_end = [&](int64_t, double) {
    trainer.sync_to_model();
    TextScore s;
    {
      train::Activity a(fmt::format("validation on {} held-out tokens", val_tok.numel()), out);
      s = score_stream(model, val_tok, ctx, val_bytes, c.common.threads);
    }
    fmt::print(out, "validation: {}\n", format_score(s));
    fmt::print(out, "unigram baseline: {}\n", format_score(unigram));
    val_nats = s.nats_per_token();
  };
  cb.final_metrics = [&] { return train::Metrics{{"val_loss", val_nats}}; };
  return naming_step_size(what, m.batch, ctx, [&] { return train::fit(trainer, f, cb); });
}

namespace {

// generation_config.json's eos_token_id when it has the key, else config.json's.
std::vector<int32_t> eos_ids(const io::HfModelDir& d, const LlamaConfig& cfg,
                             const std::string& dir) {
  std::vector<int32_t> ids;
  const auto& g = d.generation_config();
  if (!g || !g->contains("eos_token_id")) {
    for (int64_t id : cfg.eos_token_id) ids.push_back(int32_t(id));
    return ids;
  }
  const json& e = g->at("eos_token_id");
  auto add = [&](const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= cfg.vocab_size)
      fail("{}/generation_config.json: eos_token_id {} must be an id in [0, {}) or a list of them",
           dir, e.dump(), cfg.vocab_size);
    ids.push_back(v.get<int32_t>());
  };
  if (e.is_array()) {
    for (const json& v : e) add(v);
  } else if (!e.is_null()) {
    add(e);
  }
  return ids;
}

// generation_config.json's do_sample, temperature, top_k and top_p, where set (null: unset).
void read_sampling(const io::HfModelDir& d, LoadedDir& r, const std::string& dir) {
  const auto& g = d.generation_config();
  if (!g) return;
  auto get = [&](const char* key, bool (*ok)(const json&), const char* want) -> const json* {
    auto it = g->find(key);
    if (it == g->end() || it->is_null()) return nullptr;
    if (!ok(*it)) fail("{}/generation_config.json: {} {} must be {}", dir, key, it->dump(), want);
    return &*it;
  };
  if (auto v = get(
          "do_sample", [](const json& v) { return v.is_boolean(); }, "true or false"))
    r.do_sample = v->get<bool>();
  if (auto v = get(
          "temperature",
          [](const json& v) {
            return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0;
          },
          "a finite number >= 0"))
    r.temperature = v->get<double>();
  if (auto v = get(
          "top_k", [](const json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0; },
          "an integer >= 0"))
    r.top_k = v->get<int64_t>();
  if (auto v = get(
          "top_p",
          [](const json& v) {
            return v.is_number() && v.get<double>() > 0 && v.get<double>() <= 1;
          },
          "a number in (0, 1]"))
    r.top_p = v->get<double>();
}

}  // namespace

LoadedDir load_dir(const std::string& dir, bool need_tokenizer) {
  io::HfModelDir d = io::HfModelDir::open(dir);
  LoadedDir r;
  LlamaConfig cfg = nn::models::llama_config_from_json(d.config(), dir + "/config.json");
  check_memory(cfg, 8, dir);  // the model and a program's copy, f32
  r.model = std::make_unique<LlamaForCausalLM>(cfg);
  restore_strict(*r.model, d, dir);
  r.state = io::load_hf_checkpoint(d, true);
  r.state.params.clear();
  r.context = r.state.user.count("context") ? field_int(r.state, "context", dir)
                                            : cfg.max_position_embeddings;
  r.context = std::min(r.context, cfg.max_position_embeddings);
  r.eos = eos_ids(d, cfg, dir);
  read_sampling(d, r, dir);
  if (d.tokenizer_model()) {
    r.tokenizer.emplace(text::Tokenizer::load(*d.tokenizer_model()));
    check_vocab(*r.tokenizer, cfg, dir);
    auto want = r.state.user.find("tokenizer_digest");
    if (want != r.state.user.end() && want->second != bytes_digest(r.tokenizer->bytes()))
      fail("{}: tokenizer.model is not the tokenizer its training run used ({} has {}, it has {})",
           dir, io::training_state_path(dir), want->second, bytes_digest(r.tokenizer->bytes()));
  } else if (need_tokenizer) {
    fail("{}: has no tokenizer.model", dir);
  }
  return r;
}

std::vector<Document> held_out_documents(const io::Checkpoint& state, const std::string& dir) {
  auto text = state.user.find("text"), vf = state.user.find("val_fraction");
  if (text == state.user.end() || vf == state.user.end())
    fail(
        "{}: no training state of `tlaloc train llama` beside it ({}) naming its text; pass --text",
        dir, io::training_state_path(dir));
  const double val_fraction = io::parse_double(vf->second, dir + ": field val_fraction");
  std::vector<Document> docs;
  if (text->second == "default") {
    docs = default_documents();
  } else {
    std::vector<std::string> files;
    for (const auto& f : io::parse_json_strict(text->second, dir, "field text", 2))
      files.push_back(f.get<std::string>());
    docs = read_documents(files, "eval " + dir + ": the text of its training run,");
  }
  auto want = state.user.find("text_digest");
  if (want != state.user.end() && want->second != text_digest(docs))
    fail(
        "eval {}: the text of its training run ({}) has changed since (digest {}, now {}); pass "
        "--text to score other text",
        dir, text->second, want->second, text_digest(docs));
  return split_documents(docs, val_fraction).held_out;
}

lm::SampleOptions sampling_options(const LoadedDir& d, const SamplingFlags& flags,
                                   std::vector<std::string>& taken) {
  lm::SampleOptions o = flags.options;
  if (d.do_sample == false) {
    if (!flags.given_temperature) {
      o.temperature = 0;
      taken.push_back("do_sample false (greedy)");
    }
    return o;
  }
  if (d.temperature && !flags.given_temperature) {
    o.temperature = *d.temperature;
    taken.push_back(fmt::format("temperature {}", o.temperature));
  }
  if (d.top_k && !flags.given_top_k) {
    o.top_k = *d.top_k;
    taken.push_back(fmt::format("top_k {}", o.top_k));
  }
  if (d.top_p && !flags.given_top_p) {
    o.top_p = *d.top_p;
    taken.push_back(fmt::format("top_p {}", o.top_p));
  }
  return o;
}

TextScore score_documents(LoadedDir& d, const std::vector<Document>& docs, int threads) {
  const Array stream = encode_stream(*d.tokenizer, docs);
  return score_stream(*d.model, stream, d.context, total_bytes(docs), threads);
}

}  // namespace tlaloc::recipes::llama

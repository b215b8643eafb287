#include "tlaloc/train/lm.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include "tlaloc/nn/losses.h"
#include "tlaloc/random/random.h"

namespace tlaloc::train::lm {

using trace::Tensor;

nn::CausalLMConfig bench_config() { return {}; }

optim::AdamW bench_optimizer() { return {.lr = 3e-3, .weight_decay = 0.01}; }

std::vector<DataInput> data_inputs(int64_t n_tokens, int64_t batch, bool dropout_key) {
  std::vector<DataInput> in{{"tokens", {DType::s32, Shape{n_tokens}}, true},
                            {"starts", {DType::s32, Shape{batch}}, false}};
  if (dropout_key) in.push_back({"dropout_key", {DType::u32, Shape{2}}, false});
  return in;
}

LossFn loss_fn(int64_t context) {
  return [context](nn::Module& m, std::span<const Tensor> d) {
    const int64_t B = d[1].dim(0);
    Tensor pos = trace::reshape(d[1], {B, 1}) + trace::iota(Shape{1, context + 1}, 1);
    Tensor win = trace::take_rows(d[0], pos);  // [B, context + 1]
    Tensor x = trace::slice(win, 1, 0, context), y = trace::slice(win, 1, 1, context + 1);
    m.train(d.size() > 2);
    if (d.size() > 2) m.bind_key(d[2]);
    Tensor logits = m(x);
    Tensor flat = trace::reshape(logits, {B * context, logits.dim(2)});
    return std::vector<Tensor>{nn::cross_entropy(flat, trace::reshape(y, {B * context}))};
  };
}

optim::TrainStep bench_train_step(int64_t n_tokens, uint64_t seed) {
  nn::CausalLM model(bench_config());
  model.init(random::key(seed));
  return build_train_step(model, loss_fn(model.config().context),
                          data_inputs(n_tokens, kBenchBatch), bench_optimizer());
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
  const double n = parameter_count(c), need = n * bytes_per_parameter;
  const double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (have > 0 && need > have)
    fail(
        "{}: a model of {:.4g} parameters needs about {:.1f} GiB ({} bytes each), more than this "
        "machine's {:.1f} GiB of memory",
        what, n, need / kGiB, bytes_per_parameter, have / kGiB);
}

Array dropout_key(uint64_t seed, int64_t step) {
  random::Key k = random::split(random::key(seed), 2)[1];
  return random::key_data(random::fold_in(k, uint32_t(step)));
}

Array random_starts(uint64_t seed, int64_t step, int64_t count, int64_t n_tokens, int64_t context) {
  random::Key k = random::fold_in(random::key(seed), uint32_t(step));
  return random::randint(k, Shape{count}, 0, n_tokens - context);
}

}  // namespace tlaloc::train::lm

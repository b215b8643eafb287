#include "tlaloc/io/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {

namespace fs = std::filesystem;

namespace {

template <typename T>
T parse_int(const std::map<std::string, std::string>& md, const std::string& key,
            const std::string& src) {
  const std::string& s = md.at(key);
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    fail("{}: metadata '{}' is \"{}\", not a decimal integer in range", src, key, s);
  return v;
}

std::string describe_spec(DType t, const Shape& s) {
  return fmt::format("{}{}", name(t), to_string(s));
}

std::string join(const std::vector<std::string>& v) {
  std::string r;
  for (const auto& s : v) r += (r.empty() ? "" : ", ") + s;
  return r;
}

std::vector<Array> match(const NamedArrays& stored, const std::vector<TensorSpec>& expected,
                         const std::string& src, const char* what) {
  std::map<std::string, const Array*> by_name;
  for (const auto& [n, a] : stored) by_name[n] = &a;
  std::set<std::string> seen;
  std::vector<std::string> missing, unexpected, mismatched, twice;
  std::vector<Array> out;
  for (const TensorSpec& e : expected) {
    if (!seen.insert(e.name).second) twice.push_back("'" + e.name + "'");
    auto it = by_name.find(e.name);
    if (it == by_name.end()) {
      missing.push_back("'" + e.name + "'");
      continue;
    }
    const Array& a = *it->second;
    if (a.dtype() != e.dtype || a.shape() != e.shape) {
      mismatched.push_back(fmt::format("'{}': file {}, expected {}", e.name,
                                       describe_spec(a.dtype(), a.shape()),
                                       describe_spec(e.dtype, e.shape)));
      continue;
    }
    out.push_back(a);
  }
  for (const auto& [n, a] : stored)
    if (!seen.count(n)) unexpected.push_back("'" + n + "'");
  if (missing.empty() && unexpected.empty() && mismatched.empty() && twice.empty()) return out;
  std::string msg = fmt::format("{}: {} do not match:", src, what);
  if (!missing.empty()) msg += fmt::format(" missing {} ({});", missing.size(), join(missing));
  if (!unexpected.empty())
    msg += fmt::format(" unexpected {} ({});", unexpected.size(), join(unexpected));
  if (!mismatched.empty())
    msg += fmt::format(" mismatched {} ({});", mismatched.size(), join(mismatched));
  if (!twice.empty()) msg += fmt::format(" asked for twice ({});", join(twice));
  msg.pop_back();
  throw Error(msg);
}

}  // namespace

std::string exact(double v) { return fmt::format("{}", v); }

double parse_double(const std::string& s, const std::string& what) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    fail("{} is \"{}\", not a number", what, s);
  return v;
}

namespace {

// With params, or (training state) without them and with `model_digest`.
void save(const std::string& path, const Checkpoint& c, bool with_params,
          const std::string& model_digest, const SaveOptions& options) {
  if (c.optimizer.empty() && (!c.optimizer_state.empty() || !c.hyper_parameters.empty()))
    fail("{}: optimizer state or hyper-parameters given without an optimizer kind", path);
  std::map<std::string, std::string> md;
  md["tlaloc.checkpoint"] = "1";
  md["tlaloc.version"] = TLALOC_VERSION;
  md["step"] = std::to_string(c.step);
  if (c.seed) md["seed"] = std::to_string(*c.seed);
  if (c.data_position) md["data_position"] = std::to_string(*c.data_position);
  if (c.skipped_steps != 0) md["skipped_steps"] = std::to_string(c.skipped_steps);
  if (!c.optimizer.empty()) {
    md["optimizer"] = c.optimizer;
    nlohmann::json names = nlohmann::json::array();
    for (const auto& [n, a] : c.optimizer_state) names.push_back(n);
    md["optimizer_state"] = names.dump();
    for (const auto& [k, v] : c.hyper_parameters) md["optimizer." + k] = v;
  }
  if (!model_digest.empty()) md["model_digest"] = model_digest;
  for (const auto& [k, v] : c.user) md["user." + k] = v;
  std::vector<TensorRef> refs;
  if (with_params)
    for (const auto& [n, a] : c.params) refs.push_back(tensor_ref(n, a));
  for (const auto& [n, a] : c.optimizer_state) refs.push_back(tensor_ref(n, a));
  try {
    save_safetensors(path, std::move(refs), md, options);
  } catch (const Error& e) {
    std::string w = e.what();
    if (w.rfind(path, 0) == 0) throw;
    fail("{}: {}", path, w);
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& c, const SaveOptions& options) {
  save(path, c, true, c.model_digest, options);
}

void save_training_state(const std::string& path, const Checkpoint& c,
                         const std::string& model_digest, const SaveOptions& options) {
  save(path, c, false, model_digest, options);
}

NamedArrays to_arrays(const std::vector<TensorView>& views, const std::string& src) {
  std::vector<std::string> unsupported;
  for (const TensorView& v : views)
    if (!to_tlaloc(v.dtype))
      unsupported.push_back(fmt::format("'{}' ({})", v.name, v.dtype_name()));
  if (!unsupported.empty()) fail("{}: tensors of dtypes tlaloc lacks: {}", src, join(unsupported));
  NamedArrays out;
  out.reserve(views.size());
  for (const TensorView& v : views) {
    try {
      out.emplace_back(v.name, to_array(v));
    } catch (const Error& e) {
      fail("{}: {}", src, e.what());
    }
  }
  return out;
}

void check_checkpoint_output(const std::string& path, const std::string& what) {
  check_output_file(path, what, OutputMode::replace);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return;  // absent (or empty): nothing to lose
  auto refuse = [&](std::string_view why) {
    fail(
        "{} {} exists and is not a tlaloc checkpoint ({}); a checkpoint replaces only a "
        "checkpoint: give a new name, or remove the file first",
        what, path, why);
  };
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return;  // check_output_file passed: written, not read, later
  unsigned char len[8] = {};
  const bool got = std::fread(len, 1, 8, f) == 8;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  std::string header;
  if (got && n >= 2 && n <= 100'000'000 && n <= size - 8) {
    header.resize(size_t(n));
    if (std::fread(header.data(), 1, header.size(), f) != header.size()) header.clear();
  }
  std::fclose(f);
  if (header.empty() || header[0] != '{') refuse("not a safetensors file");
  const nlohmann::json j = nlohmann::json::parse(header, nullptr, false);
  if (j.is_discarded() || !j.is_object()) refuse("not a safetensors file");
  const auto md = j.find("__metadata__");
  if (md == j.end() || !md->is_object() || !md->contains("tlaloc.checkpoint"))
    refuse("a safetensors file without tlaloc's metadata");
}

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  Checkpoint c;
  c.source = path;
  const auto& md = f.metadata();
  if (md.count("tlaloc.version")) c.tlaloc_version = md.at("tlaloc.version");
  if (md.count("step")) c.step = parse_int<int64_t>(md, "step", path);
  if (md.count("seed")) c.seed = parse_int<uint64_t>(md, "seed", path);
  if (md.count("data_position")) c.data_position = parse_int<int64_t>(md, "data_position", path);
  if (md.count("skipped_steps")) c.skipped_steps = parse_int<int64_t>(md, "skipped_steps", path);
  if (md.count("model_digest")) c.model_digest = md.at("model_digest");
  std::set<std::string> state_names;
  if (md.count("optimizer")) {
    c.optimizer = md.at("optimizer");
    if (c.optimizer.empty()) fail("{}: metadata 'optimizer' is empty", path);
    if (md.count("optimizer_state")) {
      nlohmann::json names;
      try {
        names = nlohmann::json::parse(md.at("optimizer_state"));
      } catch (const nlohmann::json::exception&) {
        fail("{}: metadata 'optimizer_state' is not a JSON list of names", path);
      }
      if (!names.is_array()) fail("{}: metadata 'optimizer_state' is not a JSON list", path);
      for (const auto& n : names) {
        if (!n.is_string())
          fail("{}: metadata 'optimizer_state' holds {}, not a name", path, n.dump());
        const auto& s = n.get_ref<const std::string&>();
        if (!f.find(s)) fail("{}: optimizer state '{}' is listed but not in the file", path, s);
        state_names.insert(s);
      }
    }
  }
  for (const auto& [k, v] : md) {
    if (k.rfind("optimizer.", 0) == 0) c.hyper_parameters[k.substr(10)] = v;
    if (k.rfind("user.", 0) == 0) c.user[k.substr(5)] = v;
  }
  for (auto& [name, a] : to_arrays(f.tensors(), path))
    (state_names.count(name) ? c.optimizer_state : c.params).emplace_back(name, std::move(a));
  return c;
}

std::vector<Array> restore_params(const Checkpoint& c, const std::vector<TensorSpec>& expected) {
  return match(c.params, expected, c.source.empty() ? "checkpoint" : c.source, "parameters");
}

std::vector<Array> restore_optimizer_state(const Checkpoint& c,
                                           const std::vector<TensorSpec>& expected) {
  std::string src = c.source.empty() ? "checkpoint" : c.source;
  if (!c.has_optimizer_state()) {
    std::vector<std::string> names;
    for (const auto& e : expected) names.push_back("'" + e.name + "'");
    fail("{}: holds parameters only, but optimizer state was asked for: {}", src,
         names.empty() ? std::string("(none)") : join(names));
  }
  return match(c.optimizer_state, expected, src, "optimizer state");
}

// ---- folders ----

std::string checkpoint_path(const std::string& dir, int64_t step) {
  if (step < 0) fail("checkpoint step {} is negative", step);
  return fmt::format("{}/ckpt-{:06d}.safetensors", dir, step);
}

static std::optional<int64_t> step_of(const std::string& file) {
  const std::string pre = "ckpt-", post = ".safetensors";
  if (file.size() < pre.size() + post.size() + 6 || file.rfind(pre, 0) != 0 ||
      file.compare(file.size() - post.size(), post.size(), post) != 0)
    return std::nullopt;
  std::string digits = file.substr(pre.size(), file.size() - pre.size() - post.size());
  int64_t v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || p != digits.data() + digits.size() || v < 0) return std::nullopt;
  if (checkpoint_path("", v).substr(1) != file) return std::nullopt;  // canonical spelling
  return v;
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    if (auto s = step_of(e.path().filename().string())) out.emplace_back(*s, e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  auto all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

std::string save_checkpoint_in(const std::string& dir, const Checkpoint& c, int keep_last,
                               const SaveOptions& options) {
  if (keep_last < 0) fail("keep_last {} is negative", keep_last);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the checkpoint folder: {}", dir, ec.message());
  // Temporaries of saves that were killed (".ckpt-000100.safetensors.tmp.XXXXXX").
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string f = e.path().filename().string();
    auto tmp = f.find(".safetensors.tmp.");
    if (f.rfind(".ckpt-", 0) == 0 && tmp != std::string::npos && step_of(f.substr(1, tmp + 11)))
      fs::remove(e.path(), ec);
  }
  std::string path = checkpoint_path(dir, c.step);
  save_checkpoint(path, c, options);
  if (keep_last > 0) {
    auto all = list_checkpoints(dir);
    std::string written = fs::path(path).filename().string();
    for (size_t i = 0; i + size_t(keep_last) < all.size(); ++i)
      if (fs::path(all[i].second).filename().string() != written) fs::remove(all[i].second, ec);
  }
  return path;
}

}  // namespace tlaloc::io

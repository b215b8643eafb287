#include "tlaloc/text/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <regex>
#include <sstream>
#include <unordered_map>

#include "tlaloc/core/error.h"
#include "tlaloc/io/atomic_file.h"

namespace tlaloc::text {
namespace spm = sentencepiece;

struct Tokenizer::Impl {
  spm::SentencePieceProcessor sp;
};

namespace {

// The largest file read as a model or as training text (a model is a few MB; Llama's 500 KB).
constexpr int64_t kMaxFileBytes = int64_t(1) << 32;

// SentencePiece's status text without its source position and failed condition
// ("./src/trainer_interface.cc(660) [cond] message"); the condition when nothing follows it.
std::string spm_message(const spm::util::Status& s) {
  std::string m = s.message();
  const size_t at = m.find(".cc("), open = m.find(") [", at), close = m.find("] ", open);
  if (at == std::string::npos || open == std::string::npos || close == std::string::npos) return m;
  std::string rest = m.substr(close + 2);
  return rest.empty() ? "SentencePiece check failed: " + m.substr(open + 3, close - open - 3)
                      : rest;
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Training sentences: the lines of the texts, one at a time.
class Lines : public spm::SentenceIterator {
 public:
  explicit Lines(const std::vector<std::string>& texts) {
    for (const std::string& t : texts)
      for (std::string_view line : split_lines(t)) lines_.push_back(line);
    if (!lines_.empty()) line_ = lines_[0];
  }
  bool done() const override { return next_ >= lines_.size(); }
  const std::string& value() const override { return line_; }
  spm::util::Status status() const override { return {}; }
  void Next() override {
    if (++next_ < lines_.size()) line_ = lines_[next_];
  }

 private:
  std::vector<std::string_view> lines_;
  size_t next_ = 0;
  std::string line_;
};

// SentencePiece's training options (spm_train's flags) for `o`: see TrainOptions.
std::unordered_map<std::string, std::string> trainer_flags(const TrainOptions& o) {
  return {{"model_type", to_string(o.model_type)},
          {"vocab_size", std::to_string(o.vocab_size)},
          {"character_coverage", "0.99995"},
          {"byte_fallback", "true"},
          {"split_digits", "true"},
          {"allow_whitespace_only_pieces", "true"},
          {"normalization_rule_name", "identity"},
          {"remove_extra_whitespaces", "false"},
          {"add_dummy_prefix", "true"},
          {"unk_id", "0"},
          {"bos_id", "1"},
          {"eos_id", "2"},
          {"pad_id", "-1"},
          {"input_sentence_size", "0"},
          {"num_threads", "16"},
          {"minloglevel", "2"}};  // no INFO / WARNING lines on stderr
}

// A training failure as one line: the vocabulary size's two limits said plainly.
// The 1-based line of the first byte sequence of `s` that is not UTF-8 (RFC 3629: no overlong
// forms, no surrogates, at most U+10FFFF), 0 when all of it is.
int64_t first_non_utf8_line(std::string_view s) {
  int64_t line = 1;
  for (size_t i = 0; i < s.size();) {
    const auto c = uint8_t(s[i]);
    if (c == '\n') ++line;
    // continuation bytes after the lead byte c; -1: c cannot start a sequence
    const int n = c < 0x80                 ? 0
                  : c >= 0xc2 && c <= 0xdf ? 1
                  : c >= 0xe0 && c <= 0xef ? 2
                  : c >= 0xf0 && c <= 0xf4 ? 3
                                           : -1;
    if (n < 0 || (n > 0 && i + size_t(n) >= s.size())) return line;
    for (int k = 1; k <= n; ++k)
      if ((uint8_t(s[i + size_t(k)]) & 0xc0) != 0x80) return line;
    if (n >= 2) {
      const auto c1 = uint8_t(s[i + 1]);
      if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) ||
          (c == 0xf4 && c1 > 0x8f))
        return line;
    }
    i += size_t(n) + 1;
  }
  return 0;
}

[[noreturn]] void train_failed(const spm::util::Status& s, const TrainOptions& o) {
  const std::string m = spm_message(s);
  std::smatch g;
  if (std::regex_search(m, g, std::regex(R"(Vocabulary size too high \(\d+\).*<= (\d+))")))
    fail("tokenizer train: --vocab-size {} is too large for this text: {} allows at most {}",
         o.vocab_size, to_string(o.model_type), g[1].str());
  if (std::regex_search(m, g, std::regex(R"(smaller than required_chars\. \d+ vs (\d+))")))
    fail(
        "tokenizer train: --vocab-size {} is too small for this text: its characters, the 256 "
        "byte pieces and <unk> <s> </s> need {}",
        o.vocab_size, g[1].str());
  fail("tokenizer train ({}, --vocab-size {}): {}", to_string(o.model_type), o.vocab_size, m);
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl, std::string name)
    : impl_(std::move(impl)), name_(std::move(name)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& path) {
  struct stat st {};
  std::string file = path;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    file = (path.back() == '/' ? path : path + "/") + "tokenizer.model";
    if (::stat(file.c_str(), &st) != 0 && errno == ENOENT)
      fail("tokenizer {}: a folder without a tokenizer.model", path);
  }
  return from_bytes(read_text_file(file, "tokenizer"), file);
}

Tokenizer Tokenizer::from_bytes(std::string bytes, std::string name) {
  auto impl = std::make_unique<Impl>();
  if (bytes.empty()) fail("tokenizer {} is empty, not a SentencePiece model", name);
  if (auto s = impl->sp.LoadFromSerializedProto(bytes); !s.ok())
    fail("tokenizer {} is not a SentencePiece model ({})", name, spm_message(s));
  return Tokenizer(std::move(impl), std::move(name));
}

int32_t Tokenizer::vocab_size() const { return impl_->sp.GetPieceSize(); }
int32_t Tokenizer::unk_id() const { return impl_->sp.unk_id(); }
int32_t Tokenizer::bos_id() const { return impl_->sp.bos_id(); }
int32_t Tokenizer::eos_id() const { return impl_->sp.eos_id(); }
int32_t Tokenizer::pad_id() const { return impl_->sp.pad_id(); }

std::vector<int32_t> Tokenizer::encode_ids(std::string_view text) const {
  std::vector<int> ids;
  if (auto s = impl_->sp.Encode(text, &ids); !s.ok())
    fail("tokenizer {}: cannot encode: {}", name_, spm_message(s));
  return {ids.begin(), ids.end()};
}

Array Tokenizer::encode(std::string_view text, bool add_bos, bool add_eos) const {
  std::vector<int32_t> ids = encode_ids(text);
  if (add_bos) {
    if (bos_id() < 0) fail("tokenizer {}: the model has no <s> (bos) piece", name_);
    ids.insert(ids.begin(), bos_id());
  }
  if (add_eos) {
    if (eos_id() < 0) fail("tokenizer {}: the model has no </s> (eos) piece", name_);
    ids.push_back(eos_id());
  }
  return Array::from(Shape{int64_t(ids.size())}, ids);
}

std::vector<std::string> Tokenizer::encode_pieces(std::string_view text) const {
  std::vector<std::string> pieces;
  if (auto s = impl_->sp.Encode(text, &pieces); !s.ok())
    fail("tokenizer {}: cannot encode: {}", name_, spm_message(s));
  return pieces;
}

void Tokenizer::check_id(int64_t id) const {
  if (id < 0 || id >= vocab_size())
    fail("tokenizer {}: id {} is out of range (vocabulary of {}: 0 to {})", name_, id, vocab_size(),
         vocab_size() - 1);
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  for (int32_t id : ids) check_id(id);
  std::string out;
  if (auto s = impl_->sp.Decode(std::vector<int>(ids.begin(), ids.end()), &out); !s.ok())
    fail("tokenizer {}: cannot decode: {}", name_, spm_message(s));
  return out;
}

std::string Tokenizer::decode(const Array& ids) const {
  if (ids.dtype() != DType::s32)
    fail("tokenizer {}: ids must be s32, not {}", name_, tlaloc::name(ids.dtype()));
  return decode(ids.span<int32_t>());
}

std::string Tokenizer::piece(int32_t id) const {
  check_id(id);
  return impl_->sp.IdToPiece(id);
}

float Tokenizer::score(int32_t id) const {
  check_id(id);
  return impl_->sp.GetScore(id);
}

std::string Tokenizer::bytes() const { return impl_->sp.serialized_model_proto(); }

std::string Tokenizer::vocab_text() const {
  std::ostringstream os;  // SentencePiece writes the score with an ostream's defaults too
  for (int32_t id = 0; id < vocab_size(); ++id)
    os << impl_->sp.IdToPiece(id) << '\t' << impl_->sp.GetScore(id) << '\n';
  return os.str();
}

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      fail("{} {}: cannot open: {}", what, path, std::strerror(errno));
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
      fail("{} {} is {}, not a file", what, path, kind_of(st.st_mode));
    if (S_ISREG(st.st_mode) && st.st_size > kMaxFileBytes)
      fail("{} {}: {} bytes is more than tlaloc reads ({})", what, path, st.st_size, kMaxFileBytes);
    file.open(path, std::ios::binary);
    if (!file) fail("{} {}: cannot open: {}", what, path, std::strerror(errno));
    in = &file;
  }
  std::string bytes{std::istreambuf_iterator<char>(*in), std::istreambuf_iterator<char>()};
  if (in->bad()) fail("{} {}: read error", what, path);
  return bytes;
}

void check_utf8(std::string_view text, const std::string& what) {
  if (const int64_t line = first_non_utf8_line(text))
    fail(
        "{}: line {} is not UTF-8 text (the tokenizer reads UTF-8; convert it, e.g. with iconv -f "
        "latin1 -t utf-8)",
        what, line);
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

std::string to_string(ModelType t) { return t == ModelType::bpe ? "bpe" : "unigram"; }

ModelType parse_model_type(const std::string& s) {
  if (s == "bpe") return ModelType::bpe;
  if (s == "unigram") return ModelType::unigram;
  fail("tokenizer: model type '{}' (use bpe or unigram)", s);
}

Tokenizer train(const std::vector<std::string>& files, const TrainOptions& options) {
  if (options.vocab_size < 1 || options.vocab_size > kMaxVocabSize)
    fail("tokenizer train: --vocab-size {} is out of range [1, {}]", options.vocab_size,
         kMaxVocabSize);
  // Byte fallback (Llama's option) needs the 256 byte pieces and <unk> <s> </s> whatever the text.
  if (options.vocab_size < 3)
    fail(
        "tokenizer train: --vocab-size {} is too small: the 256 byte pieces and <unk> <s> </s> "
        "alone need 259 (and the text's characters more)",
        options.vocab_size);
  if (files.empty()) fail("tokenizer train: no text files");
  std::vector<std::string> texts;
  for (const std::string& f : files) {
    texts.push_back(read_text_file(f, "tokenizer train: text file"));
    if (texts.back().find_first_not_of('\n') == std::string::npos)
      fail("tokenizer train: text file {} is empty", f);
    check_utf8(texts.back(), "tokenizer train: text file " + f);
  }
  Lines lines(texts);
  // Every line is trained on: SentencePiece skips lines longer than max_sentence_length (4192
  // bytes by default) without a word.
  size_t longest = 4192;
  for (const std::string& t : texts)
    for (std::string_view line : split_lines(t)) longest = std::max(longest, line.size());
  if (longest > size_t(INT32_MAX))
    fail("tokenizer train: a line of {} bytes is longer than SentencePiece trains on ({})", longest,
         INT32_MAX);
  auto flags = trainer_flags(options);
  flags["max_sentence_length"] = std::to_string(longest);
  std::string model;
  auto status = spm::SentencePieceTrainer::Train(flags, &lines, &model);
  if (!status.ok()) train_failed(status, options);
  return Tokenizer::from_bytes(std::move(model), "(trained)");
}

ModelFiles model_files(const std::string& dir_or_prefix) {
  const std::string& p = dir_or_prefix;
  if (p.empty()) fail("tokenizer train: -o is empty");
  struct stat st {};
  const bool exists = ::stat(p.c_str(), &st) == 0;
  if (p.back() == '/' || (exists && S_ISDIR(st.st_mode))) {
    const std::string dir = p.back() == '/' ? p : p + "/";
    return {dir + "tokenizer.model", dir + "tokenizer.vocab"};
  }
  if (p.ends_with(".model")) {
    const std::string prefix = p.substr(0, p.size() - 6);
    return {p, prefix + ".vocab"};
  }
  // A prefix that is itself a file (`-o /dev/full`, `-o notes.txt`) is most likely a mistake.
  if (exists)
    fail("tokenizer train: -o {} is {}; give a folder or a prefix (PREFIX.model, PREFIX.vocab)", p,
         S_ISREG(st.st_mode) ? "a file" : kind_of(st.st_mode));
  return {p + ".model", p + ".vocab"};
}

void check_model_files_output(const ModelFiles& files, const std::vector<std::string>& inputs,
                              const std::string& what) {
  auto refuse = [&](const std::string& path, std::string_view why) {
    fail(
        "{} {} {}; a tokenizer replaces only a tokenizer's files: give another name, or remove "
        "the file first",
        what, path, why);
  };
  for (const std::string* path : {&files.model, &files.vocab}) {
    std::error_code ec;
    for (const std::string& in : inputs)
      if (in != "-" && std::filesystem::equivalent(*path, in, ec))
        refuse(*path, "is also a text file to train on");
    const auto size = std::filesystem::file_size(*path, ec);
    if (ec || size == 0) continue;  // absent, empty, or not a file: io::check_output_file's
    if (path == &files.model) {
      spm::SentencePieceProcessor sp;  // models are megabytes: a larger file is something else
      if (size > (uint64_t(1) << 30) || !sp.Load(*path).ok() || sp.GetPieceSize() == 0)
        refuse(*path, "exists and is not a SentencePiece model");
      continue;
    }
    std::ifstream f(*path, std::ios::binary);
    std::string line;
    while (std::getline(f, line)) {  // "piece\tscore", as vocab_text() writes
      const size_t tab = line.rfind('\t');
      char* end = nullptr;
      if (tab != std::string::npos) std::strtod(line.c_str() + tab + 1, &end);
      if (tab == std::string::npos || tab + 1 == line.size() || !end || *end != '\0')
        refuse(*path, "exists and is not a SentencePiece vocab file (piece<TAB>score lines)");
    }
  }
}

void save(const Tokenizer& tokenizer, const ModelFiles& files) {
  const std::string model = tokenizer.bytes(), vocab = tokenizer.vocab_text();
  io::AtomicFile m(files.model), v(files.vocab);
  m.write(std::as_bytes(std::span<const char>(model)));
  v.write(std::as_bytes(std::span<const char>(vocab)));
  m.commit();
  v.commit();
}

}  // namespace tlaloc::text

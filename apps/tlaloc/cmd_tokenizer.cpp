// tlaloc tokenizer train|encode|decode|info: SentencePiece models (tlaloc/text/tokenizer.h).
// encode and decode read and write what Debian's spm_encode --output_format=id / piece and
// spm_decode --input_format=id do: one output line per input line.
#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <memory>

#include "apps/tlaloc/commands.h"
#include "tlaloc/core/error.h"
#include "tlaloc/io/atomic_file.h"
#include "tlaloc/text/tokenizer.h"

namespace tlaloc::app {
namespace {

struct TokenizerArgs {
  std::string model;
  std::vector<std::string> inputs;  // none or "-": standard input
  text::TrainOptions train;
  std::string model_type = "bpe", output = "tokenizer";
  bool pieces = false, bos = false, eos = false;
};

// Every input read before anything is printed: a missing file is an error, not a cut output.
std::vector<std::string> read_inputs(const std::vector<std::string>& paths, const char* what) {
  std::vector<std::string> texts;
  for (const std::string& p : paths.empty() ? std::vector<std::string>{"-"} : paths)
    texts.push_back(text::read_text_file(p, what));
  return texts;
}

void run_train(const TokenizerArgs& a) {
  text::TrainOptions o = a.train;
  o.model_type = text::parse_model_type(a.model_type);
  const text::ModelFiles out = text::model_files(a.output);
  io::check_output_file(out.model, "tokenizer train: -o");  // before the work
  io::check_output_file(out.vocab, "tokenizer train: -o");
  text::check_model_files_output(out, a.inputs, "tokenizer train: -o");
  const auto start = std::chrono::steady_clock::now();
  text::Tokenizer t = text::train(a.inputs, o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  text::save(t, out);
  fmt::print("trained a {} tokenizer of {} pieces on {} text file{} in {:.1f} s\nwrote {} and {}\n",
             a.model_type, t.vocab_size(), a.inputs.size(), a.inputs.size() == 1 ? "" : "s",
             seconds, out.model, out.vocab);
}

void run_encode(const TokenizerArgs& a) {
  const text::Tokenizer t = text::Tokenizer::load(a.model);
  if (a.pieces && (a.bos || a.eos)) fail("tokenizer encode: --bos / --eos print ids, not --pieces");
  const std::vector<std::string> texts = read_inputs(a.inputs, "tokenizer encode: input");
  for (size_t f = 0; f < texts.size(); ++f)
    text::check_utf8(texts[f], "tokenizer encode: " + (a.inputs.empty() ? "-" : a.inputs[f]));
  for (const std::string& input : texts) {
    for (std::string_view line : text::split_lines(input)) {
      if (a.pieces) {
        fmt::print("{}\n", fmt::join(t.encode_pieces(line), " "));
        continue;
      }
      fmt::print("{}\n", fmt::join(t.encode(line, a.bos, a.eos).span<int32_t>(), " "));
    }
  }
}

// A line of ids as decimal numbers in [0, vocab) separated by spaces or tabs; errors name the
// line.
std::vector<int32_t> parse_ids(std::string_view line, int32_t vocab, const std::string& where) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while ((pos = line.find_first_not_of(" \t\r", pos)) != std::string_view::npos) {
    const size_t end = std::min(line.find_first_of(" \t\r", pos), line.size());
    const std::string_view word = line.substr(pos, end - pos);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
    if (ec != std::errc() || p != word.data() + word.size() || word[0] == '-')
      fail("tokenizer decode: {}: {} is not an id", where, quoted(word));
    if (v >= vocab)
      fail("tokenizer decode: {}: id {} is out of range (the model has {} pieces: 0 to {})", where,
           word, vocab, vocab - 1);
    ids.push_back(int32_t(v));
    pos = end;
  }
  return ids;
}

void run_decode(const TokenizerArgs& a) {
  const text::Tokenizer t = text::Tokenizer::load(a.model);
  const std::vector<std::string> texts = read_inputs(a.inputs, "tokenizer decode: input");
  std::string out;  // all lines checked before any is printed
  for (size_t f = 0; f < texts.size(); ++f) {
    const std::string name = a.inputs.empty() ? "-" : a.inputs[f];
    const std::vector<std::string_view> lines = text::split_lines(texts[f]);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string where = fmt::format("{} line {}", name, i + 1);
      out += t.decode(parse_ids(lines[i], t.vocab_size(), where)) + "\n";
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void run_info(const TokenizerArgs& a) {
  const text::Tokenizer t = text::Tokenizer::load(a.model);
  auto special = [&](int32_t id) {
    return id < 0 ? std::string("none") : fmt::format("{} {}", id, t.piece(id));
  };
  fmt::print("{}: {} pieces; unk {}, bos {}, eos {}, pad {}\n", t.name(), t.vocab_size(),
             special(t.unk_id()), special(t.bos_id()), special(t.eos_id()), special(t.pad_id()));
}

}  // namespace

void register_tokenizer(CLI::App& app) {
  static TokenizerArgs a;
  auto* cmd =
      app.add_subcommand("tokenizer", "SentencePiece tokenizers: train, encode, decode, info");
  cmd->require_subcommand(1);

  auto* train = cmd->add_subcommand(
      "train", "train a SentencePiece model on text files (Llama's options: BPE, byte fallback)");
  train->add_option("--vocab-size", a.train.vocab_size, "pieces in the vocabulary")
      ->required()
      ->check(CLI::Range(1, text::kMaxVocabSize));
  train->add_option("--model-type", a.model_type, "bpe (Llama's) or unigram")
      ->capture_default_str()
      ->check(CLI::IsMember({"bpe", "unigram"}));
  train
      ->add_option("-o,--output", a.output,
                   "PREFIX: writes PREFIX.model and PREFIX.vocab; a folder: its "
                   "tokenizer.model and tokenizer.vocab")
      ->capture_default_str();
  train->add_option("TEXT", a.inputs, "text files, one sentence per line (-: standard input)")
      ->required();
  train->callback([] { run_train(a); });

  auto* encode = cmd->add_subcommand(
      "encode", "print the ids of each line of text (as spm_encode --output_format=id)");
  encode->add_option("MODEL", a.model, "a tokenizer.model, or a folder holding one")->required();
  encode->add_option("TEXT", a.inputs, "text files (none or -: standard input)");
  encode->add_flag("--pieces", a.pieces, "print pieces instead of ids");
  encode->add_flag("--bos", a.bos, "begin each line with the <s> id");
  encode->add_flag("--eos", a.eos, "end each line with the </s> id");
  encode->callback([] { run_encode(a); });

  auto* decode = cmd->add_subcommand(
      "decode", "print the text of each line of ids (as spm_decode --input_format=id)");
  decode->add_option("MODEL", a.model, "a tokenizer.model, or a folder holding one")->required();
  decode->add_option("IDS", a.inputs, "files of ids (none or -: standard input)");
  decode->callback([] { run_decode(a); });

  auto* info = cmd->add_subcommand("info", "print a model's vocabulary size and special ids");
  info->add_option("MODEL", a.model, "a tokenizer.model, or a folder holding one")->required();
  info->callback([] { run_info(a); });
}

}  // namespace tlaloc::app

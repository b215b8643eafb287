// Tokenizers: SentencePiece models (Debian's libsentencepiece), loaded from any `tokenizer.model`
// (Llama's, or one `train` wrote) or trained on text files. The ids are SentencePiece's own:
// `encode` gives what `spm_encode --output_format=id` prints for the same model and line.
// Errors are tlaloc::Error lines naming the file, the option or the id.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/core/array.h"

namespace tlaloc::text {

class Tokenizer {
 public:
  // Reads a SentencePiece model file; a folder means the `tokenizer.model` in it (a HuggingFace
  // model directory). Throws naming the file when it is missing, not a regular file, or not a
  // SentencePiece model.
  static Tokenizer load(const std::string& path);
  // From a serialized ModelProto (a `.model` file's bytes); `name` is what errors call it.
  static Tokenizer from_bytes(std::string bytes, std::string name);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // The pieces' count: ids are 0 .. vocab_size() - 1.
  int32_t vocab_size() const;
  // The special ids, -1 where the model has none (Llama: unk 0, bos 1, eos 2, no pad).
  int32_t unk_id() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t pad_id() const;

  // Ids of `text` (UTF-8; one line as spm_encode reads it, but any text works), with bos / eos
  // around them when asked: an s32 array [n].
  Array encode(std::string_view text, bool add_bos = false, bool add_eos = false) const;
  std::vector<int32_t> encode_ids(std::string_view text) const;
  // The pieces of `text` (spm_encode --output_format=piece).
  std::vector<std::string> encode_pieces(std::string_view text) const;
  // Text of ids (an s32 array of any shape, read in order). decode(encode(x)) == x for
  // text that the model's normalizer leaves alone (Llama's and train's: identity, with byte
  // fallback, so any UTF-8 text without a leading space), as SentencePiece guarantees. Throws
  // naming an id outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids) const;
  std::string decode(const Array& ids) const;
  // The piece of one id ("▁the", "<0x0A>", "<s>"). Throws for an id out of range.
  std::string piece(int32_t id) const;
  // SentencePiece's score of an id (BPE: minus its merge rank; unigram: log probability).
  float score(int32_t id) const;

  // The model file's bytes, what save() writes.
  std::string bytes() const;
  // The `.vocab` file SentencePiece writes beside a model: "piece<TAB>score" per id.
  std::string vocab_text() const;
  // Where it came from (a path, or from_bytes' name).
  const std::string& name() const { return name_; }

 private:
  struct Impl;
  Tokenizer(std::unique_ptr<Impl> impl, std::string name);
  void check_id(int64_t id) const;
  std::unique_ptr<Impl> impl_;
  std::string name_;
};

// The whole of text file `path` ("-": standard input; a FIFO, such as a shell's <(command), is
// read too). A folder or a device is refused, as is a file over 4 GiB: tlaloc::Error starting
// with `what` and naming the path.
std::string read_text_file(const std::string& path, const std::string& what);
// Throws "<what>: line N is not UTF-8 text ..." for the first line of `text` that is not (RFC
// 3629: no overlong forms, no surrogates, at most U+10FFFF): SentencePiece would read it as
// U+FFFD, so its pieces would not give the text back.
void check_utf8(std::string_view text, const std::string& what);
// The lines of `text` as SentencePiece's readers split them: at '\n', which is not part of a
// line; a last line without one counts, an empty text has none.
std::vector<std::string_view> split_lines(std::string_view text);

enum class ModelType { bpe, unigram };
// "bpe" / "unigram"; parse throws naming the value.
std::string to_string(ModelType t);
ModelType parse_model_type(const std::string& s);

// SentencePiece training with Llama's options by default: BPE, byte fallback (every byte has a
// piece, so no text is <unk>), digits split, no normalization (identity, extra spaces kept,
// whitespace-only pieces allowed), a dummy "▁" prefix, <unk> 0, <s> 1, </s> 2, no <pad>,
// character coverage 0.99995. Deterministic: the same text (in the same order) and options give
// the same model bytes on any machine (every sentence is used, none sampled at random; unigram's
// EM, whose sums depend on its thread count, always runs SentencePiece's default 16 threads).
struct TrainOptions {
  int32_t vocab_size = 32000;
  ModelType model_type = ModelType::bpe;
};
inline constexpr int32_t kMaxVocabSize = 1 << 24;

// A model trained on the lines of `files` ("-": standard input), read before training starts.
// Throws naming the file (missing, a folder or device, unreadable, empty) or the vocabulary size
// (out of [1, kMaxVocabSize], too small for the text's characters and the byte pieces, too large
// for the text), or the line of a file that is not UTF-8.
Tokenizer train(const std::vector<std::string>& files, const TrainOptions& options);

// Output names for a model: `dir_or_prefix` an existing folder (or ending in '/') gives
// DIR/tokenizer.model and DIR/tokenizer.vocab (HuggingFace's name), NAME.model gives itself and
// NAME.vocab, else PREFIX.model and PREFIX.vocab. Throws for an empty name and for a prefix that
// exists as a file or a device (a mistake, most likely: `-o /dev/full`).
struct ModelFiles {
  std::string model, vocab;
};
ModelFiles model_files(const std::string& dir_or_prefix);
// Refuses (naming `what`, the file and why) outputs that would replace what is not a tokenizer:
// an existing model file that is not a SentencePiece model, a vocab file that is not
// "piece<TAB>score" lines, or either being one of `inputs`. Absent or empty files pass.
void check_model_files_output(const ModelFiles& files, const std::vector<std::string>& inputs,
                              const std::string& what);
// Writes the model and its `.vocab`, each atomically (io::AtomicFile: the old file or the new
// one, never a cut one); both are written to temporaries before either is renamed.
void save(const Tokenizer& tokenizer, const ModelFiles& files);

}  // namespace tlaloc::text

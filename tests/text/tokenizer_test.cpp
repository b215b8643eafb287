// text::Tokenizer: SentencePiece training with Llama's options, encode / decode round trips,
// determinism, files written, and the errors (named files, ids, vocabulary sizes). The oracle
// against Debian's spm_encode / spm_train is tests/cli/tokenizer.sh.
#include "tlaloc/text/tokenizer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "io/io_test_util.h"

namespace tlaloc::text {
namespace {

using io::testing::error_of;
using io::testing::ScratchDir;

void write(const std::string& path, const std::string& s) { std::ofstream(path) << s; }

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// About 60 KB of English-like lines: words from a fixed list in a fixed pseudo-random order.
std::string corpus() {
  const char* words[] = {"the",   "cat",   "sat",    "on",    "a",       "mat",   "and",
                         "dog",   "ran",   "after",  "it",    "through", "green", "fields",
                         "while", "rain",  "fell",   "over",  "quiet",   "towns", "of",
                         "old",   "stone", "houses", "where", "people",  "slept", "42"};
  std::string s;
  uint32_t x = 12345;
  for (int line = 0; line < 1500; ++line) {
    for (int w = 0; w < 8; ++w) {
      x = x * 1664525u + 1013904223u;
      s += std::string(w ? " " : "") + words[(x >> 8) % std::size(words)];
    }
    s += line % 7 ? ".\n" : "!\n";
  }
  return s;
}

struct Trained {
  ScratchDir dir;
  std::string text = dir.file("corpus.txt");
  Trained() { write(text, corpus()); }
};

TEST(Tokenizer, TrainsWithLlamasSpecialIds) {
  Trained t;
  Tokenizer tok = train({t.text}, {.vocab_size = 400});
  EXPECT_EQ(tok.vocab_size(), 400);
  EXPECT_EQ(tok.unk_id(), 0);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.pad_id(), -1);
  EXPECT_EQ(tok.piece(0), "<unk>");
  EXPECT_EQ(tok.piece(1), "<s>");
  EXPECT_EQ(tok.piece(2), "</s>");
  EXPECT_EQ(tok.piece(3), "<0x00>");  // byte fallback: 256 byte pieces after the specials
  EXPECT_EQ(tok.piece(3 + 0x0A), "<0x0A>");
  // Frequent words became single pieces ("▁" marks a word start).
  EXPECT_EQ(tok.encode_pieces("the cat"), (std::vector<std::string>{"\u2581the", "\u2581cat"}));
  // Digits are split (Llama's split_digits).
  EXPECT_EQ(tok.encode_pieces("42").size(), 3u);  // "▁", "4", "2"
}

TEST(Tokenizer, RoundTripsAnyUtf8Text) {
  Trained t;
  for (ModelType type : {ModelType::bpe, ModelType::unigram}) {
    Tokenizer tok = train({t.text}, {.vocab_size = 320, .model_type = type});
    for (std::string s :
         {"the cat sat on a mat.", "Unseen WORDS, with CAPITALS and punctuation?!",
          "  two leading spaces,   three inside, trailing  ", "tabs\tand\tmore\t",
          "digits 0123456789 and 3.14159", "caf\u00e9 na\u00efve \u65e5\u672c\u8a9e \U0001F600", "",
          " ", "x", "\r"}) {
      Array ids = tok.encode(s);
      ASSERT_EQ(ids.dtype(), DType::s32);
      ASSERT_EQ(ids.shape().rank(), 1);
      for (int32_t id : ids.span<int32_t>()) {
        EXPECT_GE(id, 0);
        EXPECT_LT(id, tok.vocab_size());
        EXPECT_NE(id, tok.unk_id()) << "byte fallback leaves nothing unknown: " << s;
      }
      EXPECT_EQ(tok.decode(ids), s) << to_string(type);
      EXPECT_EQ(tok.encode_ids(s), ids.to_vector<int32_t>());
    }
  }
}

TEST(Tokenizer, BosAndEos) {
  Trained t;
  Tokenizer tok = train({t.text}, {.vocab_size = 300});
  auto plain = tok.encode_ids("the dog");
  auto both = tok.encode("the dog", true, true).to_vector<int32_t>();
  ASSERT_EQ(both.size(), plain.size() + 2);
  EXPECT_EQ(both.front(), 1);
  EXPECT_EQ(both.back(), 2);
  EXPECT_EQ(tok.decode(both), "the dog");  // control pieces decode to nothing
}

TEST(Tokenizer, TrainingIsDeterministicAndSavesWhatLoads) {
  Trained t;
  const std::string copy = t.dir.file("another name.txt");
  write(copy, corpus());
  for (ModelType type : {ModelType::bpe, ModelType::unigram}) {
    Tokenizer a = train({t.text}, {.vocab_size = 320, .model_type = type});
    Tokenizer b = train({copy}, {.vocab_size = 320, .model_type = type});
    EXPECT_EQ(a.bytes(), b.bytes()) << "the file's name is not part of the model";
    const ModelFiles files = model_files(t.dir.file("m"));
    save(a, files);
    EXPECT_EQ(read(files.model), a.bytes());
    EXPECT_EQ(read(files.vocab), a.vocab_text());
    Tokenizer c = Tokenizer::load(files.model);
    EXPECT_EQ(c.name(), files.model);
    EXPECT_EQ(c.bytes(), a.bytes());
    EXPECT_EQ(c.encode_ids("the quiet towns"), a.encode_ids("the quiet towns"));
  }
}

TEST(Tokenizer, VocabFileListsPiecesAndScores) {
  Trained t;
  Tokenizer tok = train({t.text}, {.vocab_size = 300});
  std::string v = tok.vocab_text();
  EXPECT_EQ(v.substr(0, v.find('\n', v.find('\n', v.find('\n') + 1) + 1) + 1),
            "<unk>\t0\n<s>\t0\n</s>\t0\n");
  EXPECT_EQ(std::count(v.begin(), v.end(), '\n'), 300);
  EXPECT_EQ(tok.score(0), 0.0f);
}

TEST(Tokenizer, ModelFileNames) {
  ScratchDir d;
  EXPECT_EQ(model_files(d.path()).model, d.file("tokenizer.model"));
  EXPECT_EQ(model_files(d.path()).vocab, d.file("tokenizer.vocab"));
  EXPECT_EQ(model_files("new/").model, "new/tokenizer.model");
  EXPECT_EQ(model_files("out/m").model, "out/m.model");
  EXPECT_EQ(model_files("out/m").vocab, "out/m.vocab");
  EXPECT_EQ(model_files("m.model").model, "m.model");
  EXPECT_EQ(model_files("m.model").vocab, "m.vocab");
  EXPECT_EQ(error_of([] { model_files(""); }), "tokenizer train: -o is empty");
  write(d.file("notes.txt"), "x");
  EXPECT_EQ(error_of([&] { model_files(d.file("notes.txt")); }),
            "tokenizer train: -o " + d.file("notes.txt") +
                " is a file; give a folder or a prefix (PREFIX.model, PREFIX.vocab)");
}

TEST(Tokenizer, LoadsAFolderHoldingTokenizerModel) {
  Trained t;
  Tokenizer tok = train({t.text}, {.vocab_size = 300});
  save(tok, model_files(t.dir.path()));
  EXPECT_EQ(Tokenizer::load(t.dir.path()).bytes(), tok.bytes());
  EXPECT_EQ(Tokenizer::load(t.dir.path() + "/").name(), t.dir.file("tokenizer.model"));
}

TEST(Tokenizer, LoadErrorsNameTheFile) {
  ScratchDir d;
  EXPECT_EQ(error_of([&] { Tokenizer::load(d.file("none.model")); }),
            "tokenizer " + d.file("none.model") + ": cannot open: No such file or directory");
  EXPECT_EQ(error_of([&] { Tokenizer::load(d.path()); }),
            "tokenizer " + d.path() + ": a folder without a tokenizer.model");
  EXPECT_EQ(error_of([] { Tokenizer::load("/dev/zero"); }),
            "tokenizer /dev/zero is a character device, not a file");
  write(d.file("empty.model"), "");
  EXPECT_EQ(error_of([&] { Tokenizer::load(d.file("empty.model")); }),
            "tokenizer " + d.file("empty.model") + " is empty, not a SentencePiece model");
  write(d.file("text.model"), "hello, not a model\n");
  EXPECT_TRUE(
      error_of([&] {
        Tokenizer::load(d.file("text.model"));
      }).starts_with("tokenizer " + d.file("text.model") + " is not a SentencePiece model ("));
  EXPECT_TRUE(error_of([] {
                Tokenizer::from_bytes("\x0a\x03", "bytes");
              }).starts_with("tokenizer bytes is not a SentencePiece model ("));
}

TEST(Tokenizer, IdsOutOfRangeAreNamed) {
  Trained t;
  Tokenizer tok = train({t.text}, {.vocab_size = 300});
  const std::string range = " is out of range (vocabulary of 300: 0 to 299)";
  EXPECT_EQ(error_of([&] {
              tok.decode(std::vector<int32_t>{5, 300});
            }),
            "tokenizer (trained): id 300" + range);
  EXPECT_EQ(error_of([&] { tok.piece(-1); }), "tokenizer (trained): id -1" + range);
  EXPECT_EQ(error_of([&] { tok.decode(Array::from(Shape{1}, std::vector<float>{1.0f})); }),
            "tokenizer (trained): ids must be s32, not f32");
  const std::vector<int32_t> ids = tok.encode_ids("a cat");
  EXPECT_EQ(tok.decode(Array::from(Shape{int64_t(ids.size()), 1}, ids)), "a cat");
}

TEST(Tokenizer, TrainErrorsNameTheFileOrTheVocabularySize) {
  Trained t;
  EXPECT_EQ(error_of([&] { train({t.text}, {.vocab_size = 0}); }),
            "tokenizer train: --vocab-size 0 is out of range [1, 16777216]");
  EXPECT_EQ(error_of([&] { train({t.text}, {.vocab_size = 100}); }),
            "tokenizer train: --vocab-size 100 is too small for this text: its characters, the "
            "256 byte pieces and <unk> <s> </s> need 284");
  std::string large = error_of([&] { train({t.text}, {.vocab_size = 5000}); });
  EXPECT_TRUE(large.starts_with(
      "tokenizer train: --vocab-size 5000 is too large for this text: bpe allows at most "))
      << large;
  large =
      error_of([&] { train({t.text}, {.vocab_size = 5000, .model_type = ModelType::unigram}); });
  EXPECT_TRUE(large.starts_with(
      "tokenizer train: --vocab-size 5000 is too large for this text: unigram allows at most "))
      << large;
  write(t.dir.file("empty.txt"), "\n\n");
  EXPECT_EQ(error_of([&] {
              train({t.text, t.dir.file("empty.txt")}, {.vocab_size = 300});
            }),
            "tokenizer train: text file " + t.dir.file("empty.txt") + " is empty");
  EXPECT_EQ(error_of([&] { train({t.dir.file("none.txt")}, {.vocab_size = 300}); }),
            "tokenizer train: text file " + t.dir.file("none.txt") +
                ": cannot open: No such file or directory");
  EXPECT_EQ(error_of([&] { train({t.dir.path()}, {.vocab_size = 300}); }),
            "tokenizer train: text file " + t.dir.path() + " is a folder, not a file");
  EXPECT_EQ(error_of([&] { train({}, {.vocab_size = 300}); }), "tokenizer train: no text files");
  EXPECT_EQ(error_of([] { parse_model_type("word"); }),
            "tokenizer: model type 'word' (use bpe or unigram)");
}

TEST(Tokenizer, SplitsLinesAsSentencePieceReadsThem) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(split_lines(""), V{});
  EXPECT_EQ(split_lines("\n"), V{""});
  EXPECT_EQ(split_lines("a\n\nb"), (V{"a", "", "b"}));
  EXPECT_EQ(split_lines("a\r\nb\n"), (V{"a\r", "b"}));
}

}  // namespace
}  // namespace tlaloc::text

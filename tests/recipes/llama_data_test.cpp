// The text of the Llama recipe (recipes/llama_data.h): the held-out split at a line start, and
// token streams (BOS per document, a newline piece per line end) against SentencePiece's
// ids of each line and the text they decode back to.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tlaloc/recipes/llama_data.h"

using namespace tlaloc;
using recipes::llama::Document;

namespace {

std::vector<std::string> texts(const std::vector<Document>& d) {
  std::vector<std::string> t;
  for (const auto& x : d) t.push_back(x.text);
  return t;
}

TEST(LlamaData, SplitAtTheFirstLineStartFromTheCut) {
  using V = std::vector<std::string>;
  // 20 bytes, 10%: the cut is at byte 18, inside "ghij\n" (14..19): no line starts from 18 in
  // it, so the held-out text is the next document.
  std::vector<Document> docs{{"a", "abc\ndef\n"}, {"b", "0123\nghij\n"}, {"c", "xy"}};
  auto s = recipes::llama::split_documents(docs, 0.1);  // T = 20: cut 18
  EXPECT_EQ(texts(s.train), (V{"abc\ndef\n", "0123\nghij\n"}));
  EXPECT_EQ(texts(s.held_out), V{"xy"});
  // 50%: cut 10, inside "0123\n" (8..13): the held-out text starts at "ghij".
  s = recipes::llama::split_documents(docs, 0.5);
  EXPECT_EQ(texts(s.train), (V{"abc\ndef\n", "0123\n"}));
  EXPECT_EQ(texts(s.held_out), (V{"ghij\n", "xy"}));
  EXPECT_EQ(s.held_out[0].name, "b");
  // A cut exactly at a line start: 0.6 of 20 held out leaves 8, the start of document b.
  s = recipes::llama::split_documents(docs, 0.6);
  EXPECT_EQ(texts(s.train), V{"abc\ndef\n"});
  EXPECT_EQ(texts(s.held_out), (V{"0123\nghij\n", "xy"}));
  // One long line: no line start to cut at.
  EXPECT_THROW(recipes::llama::split_documents({{"x", "one long line"}}, 0.1), Error);
}

class LlamaStream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("llama_data_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "t.txt") << "the cat sat on the mat\nthe dog ran\n  two spaces\n\nend\n";
    tok_ = new text::Tokenizer(text::train({(dir_ / "t.txt").string()}, {.vocab_size = 290}));
  }
  static void TearDownTestSuite() {
    delete tok_;
    std::filesystem::remove_all(dir_);
  }
  static inline std::filesystem::path dir_;
  static inline text::Tokenizer* tok_ = nullptr;
};

TEST_F(LlamaStream, BosThenEachLineThenTheNewlinePiece) {
  const text::Tokenizer& tok = *tok_;
  const int32_t nl = recipes::llama::newline_id(tok);
  EXPECT_EQ(tok.piece(nl), "<0x0A>");
  std::vector<Document> docs{{"a", "the cat\n\nsat"}, {"b", "ran\n"}};
  Array s = recipes::llama::encode_stream(tok, docs);
  std::vector<int32_t> want{tok.bos_id()};
  for (int32_t id : tok.encode_ids("the cat")) want.push_back(id);
  want.push_back(nl);
  want.push_back(nl);  // the empty line
  for (int32_t id : tok.encode_ids("sat")) want.push_back(id);
  want.push_back(tok.bos_id());
  for (int32_t id : tok.encode_ids("ran")) want.push_back(id);
  want.push_back(nl);
  ASSERT_EQ(s.numel(), int64_t(want.size()));
  EXPECT_EQ(std::vector<int32_t>(s.data<int32_t>(), s.data<int32_t>() + s.numel()), want);
  // Decoded back: the text, documents joined (BOS dropped).
  EXPECT_EQ(recipes::llama::decode_stream(tok, want), "the cat\n\nsatran\n");
  std::vector<int32_t> spaces{tok.bos_id()};
  for (int32_t id : tok.encode_ids("  two spaces")) spaces.push_back(id);
  spaces.push_back(nl);
  EXPECT_EQ(recipes::llama::decode_stream(tok, spaces), "  two spaces\n");
  EXPECT_THROW(recipes::llama::decode_stream(tok, {int32_t(tok.vocab_size())}), Error);
}

}  // namespace

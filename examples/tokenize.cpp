// A SentencePiece tokenizer through an installed tlaloc: trains a small BPE model with Llama's
// options on a text file, encodes a sentence and decodes it back (exit 1 unless it round-trips).
//   tokenize TEXT_FILE [SENTENCE]
#include <fmt/format.h>

#include <string>

#include "tlaloc/text/tokenizer.h"

int main(int argc, char** argv) {
  using namespace tlaloc;
  if (argc < 2) {
    fmt::print(stderr, "usage: tokenize TEXT_FILE [SENTENCE]\n");
    return 2;
  }
  try {
    text::Tokenizer tok = text::train({argv[1]}, {.vocab_size = 400});
    const std::string sentence = argc > 2 ? argv[2] : "Compiled training steps, one program.";
    Array ids = tok.encode(sentence, /*add_bos=*/true);
    fmt::print("{} pieces; \"{}\" -> {}\n", tok.vocab_size(), sentence,
               fmt::join(ids.span<int32_t>(), " "));
    return tok.decode(ids) == sentence ? 0 : 1;
  } catch (const Error& e) {
    fmt::print(stderr, "tokenize: {}\n", e.what());
    return 1;
  }
}

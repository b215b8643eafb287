// The text of `tlaloc train llama` and `tlaloc eval` on Llama directories: documents (the files
// given, or the default corpus), the held-out split, and token streams.
//
// Token streams: each document (a file; a piece of one at the held-out split) is BOS followed
// by its lines, each line encoded on its own (SentencePiece's unit, as the tokenizer was
// trained: a dummy "▁" prefix per line) and followed by the byte piece <0x0A> when the text has
// a '\n' there. decode_stream inverts it: the text again, line by line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/core/array.h"
#include "tlaloc/text/tokenizer.h"

namespace tlaloc::recipes::llama {

struct Document {
  std::string name;  // a path, or "bible gen1:1-rev22:21"
  std::string text;
};

// The files, read whole (text::read_text_file: errors name the file, after `what`). Throws when
// the total is empty, or naming the file and line of text that is not UTF-8 (SentencePiece would
// read it as U+FFFD, so neither the tokens nor bits per byte would describe the file).
std::vector<Document> read_documents(const std::vector<std::string>& files,
                                     const std::string& what = "train llama: --text");
// "crc32:XXXXXXXX:BYTES" of the documents' texts in order (lengths included, names not): the
// training state records it so that a resume or `eval` can tell when a run's text changed.
std::string text_digest(const std::vector<Document>& docs);
// The default corpus: the King James Bible (Debian's bible-kjv: the output of `bible
// gen1:1-rev22:21`, from /usr/bin/bible or `bible` on PATH) followed by the English fortunes
// files (lm::default_corpus()). Throws naming the package that is missing.
std::vector<Document> default_documents();

// The documents split in two at a line start: `held_out` is the text from the first line that
// starts at or after byte T - floor(T · val_fraction) of the documents concatenated (T bytes in
// all) to the end; `train` the text before it. Both keep the document boundaries (the document
// cut in two gives a piece to each). Throws when either side is empty.
struct Split {
  std::vector<Document> train, held_out;
};
Split split_documents(const std::vector<Document>& docs, double val_fraction);

int64_t total_bytes(const std::vector<Document>& docs);

// The id of the byte piece <0x0A> (the newline). Throws naming the tokenizer when it has none
// (a model without byte fallback).
int32_t newline_id(const text::Tokenizer& tok);

// The token stream of `docs` (see the top): s32 [n]. Throws naming the tokenizer when it has
// no BOS.
Array encode_stream(const text::Tokenizer& tok, const std::vector<Document>& docs);
// The text of a stream (or of ids continuing one): each run of ids between newline pieces, BOS
// and EOS decoded as one line; newline pieces give '\n', BOS and EOS nothing. Throws for an id
// outside the vocabulary.
std::string decode_stream(const text::Tokenizer& tok, const std::vector<int32_t>& ids);

}  // namespace tlaloc::recipes::llama

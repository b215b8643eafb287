#include "tlaloc/recipes/llama_data.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <sys/wait.h>

#include "tlaloc/core/error.h"
#include "tlaloc/recipes/common.h"
#include "tlaloc/recipes/lm.h"

namespace tlaloc::recipes::llama {

std::vector<Document> read_documents(const std::vector<std::string>& files,
                                     const std::string& what) {
  std::vector<Document> docs;
  for (const auto& f : files) {
    docs.push_back({f, text::read_text_file(f, what)});
    text::check_utf8(docs.back().text, what + " " + f);
  }
  if (total_bytes(docs) == 0) fail("{}: the text ({} files) is empty", what, files.size());
  return docs;
}

std::string text_digest(const std::vector<Document>& docs) {
  std::string all;
  for (const auto& d : docs) all += fmt::format("{}:", d.text.size()) + d.text;
  return bytes_digest(all);
}

namespace {

// The whole output of `bible gen1:1-rev22:21`.
std::string kjv_bible() {
  const char* exe = "/usr/bin/bible";
  std::string cmd = std::filesystem::exists(exe) ? exe : "bible";
  cmd += " gen1:1-rev22:21 2>/dev/null";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) fail("train llama: cannot run `bible`: {}", std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0 || out.empty())
    fail(
        "train llama: `bible gen1:1-rev22:21` failed (exit status {}): install Debian's "
        "bible-kjv package or pass --text",
        WIFEXITED(status) ? WEXITSTATUS(status) : status);
  return out;
}

}  // namespace

std::vector<Document> default_documents() {
  std::vector<Document> docs{{"bible gen1:1-rev22:21", kjv_bible()}};
  for (auto& d : read_documents(lm::default_corpus())) docs.push_back(std::move(d));
  return docs;
}

int64_t total_bytes(const std::vector<Document>& docs) {
  int64_t n = 0;
  for (const auto& d : docs) n += int64_t(d.text.size());
  return n;
}

Split split_documents(const std::vector<Document>& docs, double val_fraction) {
  const int64_t total = total_bytes(docs);
  const int64_t cut = total - int64_t(double(total) * val_fraction);
  Split s;
  int64_t at = 0;  // bytes before the current document
  bool held = false;
  for (const auto& d : docs) {
    const int64_t n = int64_t(d.text.size());
    if (held) {
      s.held_out.push_back(d);
    } else if (at + n <= cut) {  // wholly before the cut (a line may start at its end only)
      s.train.push_back(d);
    } else {
      // The first line start at or after `cut` within d: 0, or just after a '\n'.
      int64_t i = std::max<int64_t>(cut - at, 0);
      if (i > 0 && d.text[size_t(i - 1)] != '\n') {
        const size_t nl = d.text.find('\n', size_t(i));
        i = nl == std::string::npos ? n : int64_t(nl) + 1;
      }
      if (i > 0) s.train.push_back({d.name, d.text.substr(0, size_t(i))});
      if (i < n) {
        s.held_out.push_back({d.name, d.text.substr(size_t(i))});
        held = true;
      }
    }
    at += n;
  }
  if (s.held_out.empty() || s.train.empty())
    fail(
        "train llama: the text ({} bytes) has no line start to hold out its last {} at (one long "
        "line?); pass more text",
        total, val_fraction);
  return s;
}

int32_t newline_id(const text::Tokenizer& tok) {
  for (int32_t i = 0; i < tok.vocab_size(); ++i)
    if (tok.piece(i) == "<0x0A>") return i;
  fail("{}: the tokenizer has no byte piece <0x0A> for line ends (no byte fallback)", tok.name());
}

Array encode_stream(const text::Tokenizer& tok, const std::vector<Document>& docs) {
  const int32_t bos = tok.bos_id(), nl = newline_id(tok);
  if (bos < 0) fail("{}: the tokenizer has no BOS piece to start documents with", tok.name());
  std::vector<int32_t> ids;
  for (const auto& d : docs) {
    ids.push_back(bos);
    std::string_view t = d.text;
    for (std::string_view line : text::split_lines(t)) {
      for (int32_t id : tok.encode_ids(line)) ids.push_back(id);
      const size_t end = size_t(line.data() - t.data()) + line.size();
      if (end < t.size()) ids.push_back(nl);  // the '\n' after the line
    }
  }
  return Array::from(Shape{int64_t(ids.size())}, ids);
}

std::string decode_stream(const text::Tokenizer& tok, const std::vector<int32_t>& ids) {
  const int32_t nl = newline_id(tok);
  std::string out;
  std::vector<int32_t> line;
  auto flush = [&] {
    out += tok.decode(line);
    line.clear();
  };
  for (int32_t id : ids) {
    if (id == nl) {
      flush();
      out += '\n';
    } else if (id == tok.bos_id() || id == tok.eos_id()) {
      flush();  // a document's bounds: its first line was encoded on its own
    } else {
      tok.piece(id);  // checks the range
      line.push_back(id);
    }
  }
  flush();
  return out;
}

}  // namespace tlaloc::recipes::llama

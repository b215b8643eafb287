#include "tlaloc/io/metrics_csv.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tlaloc/core/error.h"

namespace tlaloc::io {

namespace {

std::string cell(double v) { return std::isnan(v) ? std::string() : fmt::format("{}", v); }

std::string joined_columns() {
  std::string s;
  for (auto c : kMetricsColumns) s += (s.empty() ? "" : ",") + std::string(c);
  return s;
}

std::vector<std::string_view> split_cells(std::string_view line) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    size_t comma = line.find(',', pos);
    out.push_back(line.substr(pos, comma == std::string_view::npos ? line.npos : comma - pos));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

// The file's lines, each without its '\n' and a '\r' before it. A last line without '\n' counts.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view l = text.substr(pos, nl == text.npos ? text.npos : nl - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    lines.push_back(l);
    if (nl == text.npos) break;
    pos = nl + 1;
  }
  return lines;
}

std::string file_text(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("{}: {}: {}", what, path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("{}: {} is a folder, not a metrics file", what, path);
  if (!S_ISREG(st.st_mode)) fail("{}: {} is not a regular file", what, path);
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: {}: cannot open: {}", what, path, std::strerror(errno));
  std::ostringstream s;
  s << f.rdbuf();
  if (f.bad()) fail("{}: {}: cannot read: {}", what, path, std::strerror(errno));
  return s.str();
}

}  // namespace

std::string metrics_header() { return joined_columns() + "\n"; }

std::string format_metrics_row(const MetricsRow& r) {
  return fmt::format("{},{},{},{},{},{},{},{}\n", r.kind, r.step, r.epoch, cell(r.train_loss),
                     cell(r.val_loss), cell(r.val_accuracy), cell(r.lr), cell(r.wall_s));
}

std::vector<MetricsRow> parse_metrics(std::string_view text, const std::string& source,
                                      const std::string& what) {
  const std::vector<std::string_view> lines = split_lines(text);
  if (lines.empty()) fail("{}: {} line 1: the file is empty (no header, no rows)", what, source);
  // Where each column is in this file's header.
  const std::vector<std::string_view> header = split_cells(lines[0]);
  std::array<size_t, kMetricsColumns.size()> at;
  at.fill(header.size());
  for (size_t i = 0; i < header.size(); ++i) {
    auto it = std::find(kMetricsColumns.begin(), kMetricsColumns.end(), header[i]);
    if (it == kMetricsColumns.end())
      fail("{}: {} line 1: unknown column {} (the layout is {})", what, source, quoted(header[i]),
           joined_columns());
    size_t c = size_t(it - kMetricsColumns.begin());
    if (at[c] != header.size()) fail("{}: {} line 1: column {} appears twice", what, source, *it);
    at[c] = i;
  }
  for (size_t c = 0; c < kMetricsColumns.size(); ++c)
    if (at[c] == header.size())
      fail("{}: {} line 1: no column '{}' (the layout is {})", what, source, kMetricsColumns[c],
           joined_columns());

  std::vector<MetricsRow> rows;
  for (size_t n = 1; n < lines.size(); ++n) {
    const int64_t line = int64_t(n) + 1;
    if (lines[n].empty()) fail("{}: {} line {}: the line is empty", what, source, line);
    const std::vector<std::string_view> cells = split_cells(lines[n]);
    if (cells.size() != header.size())
      fail("{}: {} line {}: {} cells, the header has {}", what, source, line, cells.size(),
           header.size());
    auto get = [&](size_t column) { return cells[at[column]]; };
    auto whole = [&](size_t column) {
      std::string_view s = get(column);
      int64_t v = 0;
      bool ok = !s.empty() && s.size() <= 15;
      for (char ch : s) {
        ok = ok && ch >= '0' && ch <= '9';
        if (ok) v = v * 10 + (ch - '0');
      }
      if (!ok)
        fail("{}: {} line {}: {} in column {} is not a whole number >= 0", what, source, line,
             quoted(s), kMetricsColumns[column]);
      return v;
    };
    auto number = [&](size_t column) {
      std::string_view s = get(column);
      if (s.empty()) return double(NAN);
      const std::string text(s);
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(text.c_str(), &end);
      const bool spaces = std::isspace(static_cast<unsigned char>(text.front())) != 0;
      if (end != text.c_str() + text.size() || spaces)
        fail("{}: {} line {}: {} in column {} is not a number", what, source, line, quoted(s),
             kMetricsColumns[column]);
      if (!std::isfinite(v))
        fail("{}: {} line {}: {} in column {} is not a finite number", what, source, line,
             quoted(s), kMetricsColumns[column]);
      return v;
    };
    MetricsRow r;
    r.line = line;
    r.kind = std::string(get(0));
    if (std::find(kMetricsKinds.begin(), kMetricsKinds.end(), r.kind) == kMetricsKinds.end())
      fail("{}: {} line {}: kind {} is not step, epoch, eval or final", what, source, line,
           quoted(r.kind));
    r.step = whole(1);
    r.epoch = whole(2);
    r.train_loss = number(3);
    r.val_loss = number(4);
    r.val_accuracy = number(5);
    r.lr = number(6);
    r.wall_s = number(7);
    rows.push_back(std::move(r));
  }
  if (rows.empty()) fail("{}: {} line 2: no rows (only the header)", what, source);
  return rows;
}

std::vector<MetricsRow> read_metrics(const std::string& path, const std::string& what) {
  return parse_metrics(file_text(path, what), path, what);
}

void check_metrics_header(const std::string& path, const std::string& what, bool fresh_run) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return;
  std::ifstream f(path, std::ios::binary);
  std::string first;
  std::getline(f, first);
  if (!first.empty() && first.back() == '\r') first.pop_back();
  if (first + "\n" != metrics_header())
    fail("{} {} holds another layout (its header is {}, this version writes {}); give a new file",
         what, path, quoted(first, 200), joined_columns());
  std::string row;
  if (fresh_run && std::getline(f, row))
    fail(
        "{} {} holds the rows of another run; a new run writes a new file (--resume continues "
        "the run that wrote them)",
        what, path);
}

}  // namespace tlaloc::io

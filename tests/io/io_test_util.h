// Helpers for the io tests: scratch folders and raw file bytes built by hand.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support/error_of.h"
#include "tlaloc/core/error.h"

namespace tlaloc::io::testing {

using tlaloc::testing::error_of;  // the message of the tlaloc::Error f throws

// A fresh folder under TMPDIR (or /tmp), removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/tlaloc_io_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// 8-byte little-endian `length` (written as given), then `header`, then `data`.
inline std::vector<std::byte> raw_file(uint64_t length, const std::string& header,
                                       const std::vector<std::byte>& data = {}) {
  std::vector<std::byte> b(8);
  for (int i = 0; i < 8; ++i) b[size_t(i)] = std::byte((length >> (8 * i)) & 0xff);
  auto h = bytes_of(header);
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}
// The same with the true header length.
inline std::vector<std::byte> raw_file(const std::string& header,
                                       const std::vector<std::byte>& data = {}) {
  return raw_file(header.size(), header, data);
}

inline void write_bytes(const std::string& path, const std::vector<std::byte>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

inline std::vector<std::byte> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
  return b;
}

inline std::string read_text(const std::string& path) {
  auto b = read_bytes(path);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace tlaloc::io::testing

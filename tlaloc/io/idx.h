// idx files (the MNIST / Fashion-MNIST container, format described at
// yann.lecun.com/exdb/mnist): bytes 0x00 0x00, a type code, the rank; then one big-endian u32
// per dimension; then the elements, big-endian, row-major. Files may be gzip'd (read through
// zlib, detected by the gzip magic 1f 8b) or plain.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/core/array.h"

namespace tlaloc::io {

// idx element type codes.
enum class IdxType : uint8_t {
  u8 = 0x08,
  s8 = 0x09,
  s16 = 0x0B,
  s32 = 0x0C,
  f32 = 0x0D,
  f64 = 0x0E
};

struct IdxData {
  IdxType type = IdxType::u8;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // elements in host (little-endian) byte order
};

// Reads an idx file. Throws tlaloc::Error naming the file for: a missing / unreadable file; a
// truncated or corrupt gzip stream, or bytes after it; a magic other than 00 00 <known type>
// <rank>; a file whose length disagrees with the dims (shorter or longer, with both numbers);
// a declared size over 4 GiB.
IdxData read_idx(const std::string& path);

// Debian's dataset-fashion-mnist installs the four .gz files here.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// Class names by label (Fashion-MNIST README, zalandoresearch/fashion-mnist).
inline constexpr std::array<std::string_view, 10> kFashionMnistClasses = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

struct ImageSet {
  Array images;  // f32 [N, rows*cols], pixel / 255, so in [0, 1]
  Array labels;  // s32 [N], in [0, 10)
  int64_t rows = 0, cols = 0;
};

// Loads "{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz" from `dir` (the .gz name, else the
// name without .gz). Throws tlaloc::Error: a missing file names it and the Debian package
// dataset-fashion-mnist; images not u8 of rank 3 or not 28 x 28, labels not u8 of rank 1,
// counts that differ, no images, a label >= 10.
ImageSet load_fashion_mnist(const std::string& dir, bool train);

}  // namespace tlaloc::io

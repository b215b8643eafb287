// idx reader: small files written here byte by byte (plain and gzip'd through zlib), every
// refusal, and the real Fashion-MNIST files when dataset-fashion-mnist is installed.
#include "tlaloc/io/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include "io/io_test_util.h"

namespace tlaloc::io {
namespace {

using testing::error_of;
using testing::ScratchDir;

std::vector<std::byte> idx_bytes(uint8_t type, std::vector<uint32_t> dims,
                                 std::vector<uint8_t> payload) {
  std::vector<std::byte> b = {std::byte(0), std::byte(0), std::byte(type), std::byte(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(std::byte((d >> s) & 0xff));
  for (uint8_t p : payload) b.push_back(std::byte(p));
  return b;
}

void write_gz(const std::string& path, const std::vector<std::byte>& b) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, b.data(), unsigned(b.size())), int(b.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

TEST(Idx, ReadsPlainAndGzipFiles) {
  ScratchDir dir;
  auto b = idx_bytes(0x08, {2, 3}, {0, 1, 2, 253, 254, 255});
  testing::write_bytes(dir.file("a.idx"), b);
  write_gz(dir.file("a.idx.gz"), b);
  for (const char* name : {"a.idx", "a.idx.gz"}) {
    IdxData d = read_idx(dir.file(name));
    EXPECT_EQ(d.type, IdxType::u8);
    EXPECT_EQ(d.dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(d.data, (std::vector<uint8_t>{0, 1, 2, 253, 254, 255}));
  }
}

TEST(Idx, MultiByteElementsAreBigEndian) {
  ScratchDir dir;
  // s16 0x0102 = 258; s32 0xfffffffe = -2; f32 0x3fc00000 = 1.5; f64 0xc000000000000000 = -2.
  testing::write_bytes(dir.file("s16"), idx_bytes(0x0B, {1}, {0x01, 0x02}));
  testing::write_bytes(dir.file("s32"), idx_bytes(0x0C, {1}, {0xff, 0xff, 0xff, 0xfe}));
  testing::write_bytes(dir.file("f32"), idx_bytes(0x0D, {1}, {0x3f, 0xc0, 0, 0}));
  testing::write_bytes(dir.file("f64"), idx_bytes(0x0E, {1}, {0xc0, 0, 0, 0, 0, 0, 0, 0}));
  int16_t s16;
  int32_t s32;
  float f32;
  double f64;
  std::memcpy(&s16, read_idx(dir.file("s16")).data.data(), 2);
  std::memcpy(&s32, read_idx(dir.file("s32")).data.data(), 4);
  std::memcpy(&f32, read_idx(dir.file("f32")).data.data(), 4);
  std::memcpy(&f64, read_idx(dir.file("f64")).data.data(), 8);
  EXPECT_EQ(s16, 258);
  EXPECT_EQ(s32, -2);
  EXPECT_EQ(f32, 1.5f);
  EXPECT_EQ(f64, -2.0);
}

TEST(Idx, Refusals) {
  ScratchDir dir;
  EXPECT_NE(error_of([&] { read_idx(dir.file("none.gz")); }).find("none.gz: no such file"),
            std::string::npos);
  // Wrong magic, plain and gzip'd.
  auto bad = idx_bytes(0x08, {1}, {7});
  bad[0] = std::byte(0x12);
  testing::write_bytes(dir.file("magic"), bad);
  write_gz(dir.file("magic.gz"), bad);
  for (const char* f : {"magic", "magic.gz"}) {
    std::string m = error_of([&] { read_idx(dir.file(f)); });
    EXPECT_NE(m.find("not an idx file: magic bytes 12 00 08 01"), std::string::npos) << m;
  }
  auto badtype = idx_bytes(0x07, {1}, {7});
  testing::write_bytes(dir.file("type"), badtype);
  EXPECT_NE(error_of([&] { read_idx(dir.file("type")); }).find("magic bytes 00 00 07 01"),
            std::string::npos);
  // Length disagreeing with the dims: short, long, header cut.
  testing::write_bytes(dir.file("short"), idx_bytes(0x08, {2, 2}, {1, 2, 3}));
  EXPECT_NE(error_of([&] { read_idx(dir.file("short")); }).find("length 15 disagrees"),
            std::string::npos);
  testing::write_bytes(dir.file("long"), idx_bytes(0x0C, {1}, {0, 0, 0, 1, 9}));
  EXPECT_NE(error_of([&] { read_idx(dir.file("long")); }).find("declares 12 bytes"),
            std::string::npos);
  auto cut = idx_bytes(0x08, {5, 5}, {});
  cut.resize(9);
  testing::write_bytes(dir.file("cut"), cut);
  EXPECT_NE(error_of([&] { read_idx(dir.file("cut")); }).find("shorter than the idx header"),
            std::string::npos);
  // Oversized declaration.
  testing::write_bytes(dir.file("huge"), idx_bytes(0x0E, {65536, 65536}, {}));
  EXPECT_NE(error_of([&] { read_idx(dir.file("huge")); }).find("byte limit"), std::string::npos);
}

TEST(Idx, TruncatedAndCorruptGzip) {
  ScratchDir dir;
  std::vector<uint8_t> px(3000);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 7919 % 251);
  write_gz(dir.file("ok.gz"), idx_bytes(0x08, {3, 1000}, px));
  auto gz = testing::read_bytes(dir.file("ok.gz"));
  for (size_t keep : {gz.size() - 1, gz.size() - 8, gz.size() / 2, size_t(12)}) {
    testing::write_bytes(dir.file("t.gz"),
                         std::vector<std::byte>(gz.begin(), gz.begin() + long(keep)));
    std::string m = error_of([&] { read_idx(dir.file("t.gz")); });
    EXPECT_NE(m.find("t.gz: truncated gzip file"), std::string::npos) << keep << ": " << m;
  }
  auto corrupt = gz;
  corrupt[gz.size() - 3] ^= std::byte(0xff);  // inside the CRC / length trailer
  testing::write_bytes(dir.file("c.gz"), corrupt);
  EXPECT_NE(error_of([&] { read_idx(dir.file("c.gz")); }).find("corrupt gzip data"),
            std::string::npos);
  auto extra = gz;
  extra.push_back(std::byte(0));
  testing::write_bytes(dir.file("x.gz"), extra);
  EXPECT_NE(error_of([&] { read_idx(dir.file("x.gz")); }).find("1 bytes follow the gzip stream"),
            std::string::npos);
}

TEST(FashionMnist, LoadsScaledImagesAndLabels) {
  ScratchDir dir;
  // 3 images of 28 x 28 (the first starting 0, 255, 51, 102) and their labels, in the dataset's
  // file names.
  std::vector<uint8_t> pixels(3 * 784, 7);
  for (size_t i = 0; i < 4; ++i) pixels[i] = std::vector<uint8_t>{0, 255, 51, 102}[i];
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"), idx_bytes(0x08, {3, 28, 28}, pixels));
  write_gz(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes(0x08, {3}, {9, 0, 3}));
  ImageSet s = load_fashion_mnist(dir.path(), /*train=*/false);
  EXPECT_EQ(s.images.dtype(), DType::f32);
  EXPECT_EQ(s.images.shape(), (Shape{3, 784}));
  EXPECT_EQ(s.labels.dtype(), DType::s32);
  EXPECT_EQ(s.labels.to_vector<int32_t>(), (std::vector<int32_t>{9, 0, 3}));
  EXPECT_EQ(s.images.at(0), 0.0);
  EXPECT_EQ(s.images.at(1), 1.0);
  EXPECT_FLOAT_EQ(float(s.images.at(2)), 0.2f);  // 51 / 255
  EXPECT_FLOAT_EQ(float(s.images.at(3)), 0.4f);  // 102 / 255
  EXPECT_FLOAT_EQ(float(s.images.at(3 * 784 - 1)), 7.0f / 255.0f);
  EXPECT_EQ(s.rows, 28);

  // Missing training files name the file and the Debian package.
  std::string m = error_of([&] { load_fashion_mnist(dir.path(), true); });
  EXPECT_NE(m.find("train-images-idx3-ubyte.gz: no such file"), std::string::npos) << m;
  EXPECT_NE(m.find("dataset-fashion-mnist"), std::string::npos) << m;
  // Counts that differ and labels out of range.
  write_gz(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes(0x08, {2}, {9, 0}));
  EXPECT_NE(error_of([&] { load_fashion_mnist(dir.path(), false); }).find("holds 2 labels"),
            std::string::npos);
  write_gz(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes(0x08, {3}, {9, 10, 0}));
  EXPECT_NE(error_of([&] { load_fashion_mnist(dir.path(), false); }).find("label 10 of sample 1"),
            std::string::npos);
  // Images of another size (the models take 28 x 28), and an empty set (0 / 0 accuracy).
  write_gz(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes(0x08, {3}, {9, 0, 3}));
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"),
           idx_bytes(0x08, {3, 2, 2}, std::vector<uint8_t>(12)));
  EXPECT_EQ(error_of([&] { load_fashion_mnist(dir.path(), false); }),
            dir.file("t10k-images-idx3-ubyte.gz") +
                ": its images are 2 x 2; Fashion-MNIST's are 28 x 28");
  write_gz(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes(0x08, {0}, {}));
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"), idx_bytes(0x08, {0, 28, 28}, {}));
  EXPECT_EQ(
      error_of([&] { load_fashion_mnist(dir.path(), false); }),
      dir.file("t10k-images-idx3-ubyte.gz") + ": holds no images (a test set needs at least one)");
}

TEST(FashionMnist, RealFilesWhenInstalled) {
  if (!std::filesystem::exists(kFashionMnistDir))
    GTEST_SKIP() << kFashionMnistDir << " absent (Debian package dataset-fashion-mnist)";
  // Sizes and balance from the dataset's README: 60000 / 10000 images of 28x28, 10 classes
  // with 6000 / 1000 each.
  for (bool train : {true, false}) {
    ImageSet s = load_fashion_mnist(kFashionMnistDir, train);
    int64_t n = train ? 60000 : 10000;
    EXPECT_EQ(s.images.shape(), (Shape{n, 784}));
    EXPECT_EQ(s.labels.shape(), (Shape{n}));
    EXPECT_EQ(s.rows, 28);
    EXPECT_EQ(s.cols, 28);
    std::vector<int64_t> count(10);
    for (int32_t l : s.labels.span<int32_t>()) ++count[size_t(l)];
    for (int64_t c : count) EXPECT_EQ(c, n / 10);
    auto px = s.images.span<float>();
    EXPECT_EQ(*std::min_element(px.begin(), px.end()), 0.0f);
    EXPECT_EQ(*std::max_element(px.begin(), px.end()), 1.0f);
    EXPECT_EQ(s.labels.span<int32_t>()[0], 9);  // both splits start with an ankle boot
  }
}

}  // namespace
}  // namespace tlaloc::io

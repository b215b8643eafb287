#include "tlaloc/io/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace tlaloc::io {

namespace {

constexpr uint64_t kMaxIdxBytes = uint64_t(4) << 30;

int elem_size(uint8_t code) {
  switch (code) {
    case 0x08:
    case 0x09:
      return 1;
    case 0x0B:
      return 2;
    case 0x0C:
    case 0x0D:
      return 4;
    case 0x0E:
      return 8;
    default:
      return 0;
  }
}

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// Total bytes the header at the start of `b` declares, or 0 while too few bytes are known.
// Throws on a bad magic or an oversized declaration.
uint64_t declared_size(const std::vector<uint8_t>& b, const std::string& path) {
  if (b.size() < 4) return 0;
  if (b[0] != 0 || b[1] != 0 || elem_size(b[2]) == 0)
    fail(
        "{}: not an idx file: magic bytes {:02x} {:02x} {:02x} {:02x} (expected 00 00, a type "
        "code 08/09/0b/0c/0d/0e, the rank)",
        path, b[0], b[1], b[2], b[3]);
  uint64_t head = 4 + 4 * uint64_t(b[3]);
  if (b.size() < head) return 0;
  uint64_t n = uint64_t(elem_size(b[2]));
  for (int i = 0; i < b[3]; ++i) {
    n *= be32(&b[4 + 4 * size_t(i)]);  // <= 2^32 per factor; checked below before overflow
    if (n > kMaxIdxBytes)
      fail("{}: idx dims declare more than tlaloc's {} byte limit", path, kMaxIdxBytes);
  }
  return head + n;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open: {}", path, std::strerror(errno));
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("{}: read error", path);
  return b;
}

// Inflates a gzip member; stops early once more bytes than the header declares have come out.
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& in, const std::string& path) {
  if (in.size() > UINT32_MAX) fail("{}: gzip file of {} bytes is over 4 GiB", path, in.size());
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) fail("{}: zlib inflateInit2 failed", path);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = uInt(in.size());
  std::vector<uint8_t> out;
  uint64_t want = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    size_t have = out.size();
    size_t grow = want ? size_t(std::min<uint64_t>(want + 1 - have, 1 << 20)) : 4096;
    if (grow == 0) grow = 1;
    out.resize(have + grow);
    z.next_out = out.data() + have;
    z.avail_out = uInt(grow);
    rc = inflate(&z, Z_NO_FLUSH);
    out.resize(have + grow - z.avail_out);
    bool exhausted = rc == Z_BUF_ERROR && z.avail_in == 0;
    if (rc != Z_OK && rc != Z_STREAM_END) {
      std::string msg = z.msg ? z.msg : "";
      inflateEnd(&z);
      if (exhausted)
        fail(
            "{}: truncated gzip file: the stream stops early ({} compressed bytes, {} bytes "
            "inflated)",
            path, in.size(), out.size());
      fail("{}: corrupt gzip data after {} bytes inflated: {}", path, out.size(),
           msg.empty() ? "zlib error " + std::to_string(rc) : msg);
    }
    if (!want && (want = declared_size(out, path))) out.reserve(size_t(want) + 1);
    if (want && out.size() > want) {
      inflateEnd(&z);
      fail("{}: inflates to more than the {} bytes its idx header declares", path, want);
    }
  }
  size_t rest = z.avail_in;
  inflateEnd(&z);
  if (rest != 0) fail("{}: {} bytes follow the gzip stream", path, rest);
  return out;
}

}  // namespace

IdxData read_idx(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) fail("{}: no such file", path);
    fail("{}: cannot be read: {}", path, std::strerror(errno));
  }
  // A folder reads as an I/O error mid-stream, a device may never end: name them instead.
  if (S_ISDIR(st.st_mode)) fail("{} is a folder, not an idx file", path);
  if (!S_ISREG(st.st_mode)) fail("{} is not a regular file (a device or a pipe?)", path);
  std::vector<uint8_t> raw = read_file(path);
  bool gz = raw.size() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b;
  std::vector<uint8_t> b = gz ? gunzip(raw, path) : std::move(raw);
  const char* kind = gz ? "inflated " : "";
  if (b.size() < 4)
    fail("{}: {}length {} is shorter than the 4-byte idx magic", path, kind, b.size());
  uint64_t total = declared_size(b, path);
  if (total == 0)
    fail("{}: {}length {} is shorter than the idx header ({} bytes for rank {})", path, kind,
         b.size(), 4 + 4 * int(b[3]), int(b[3]));
  if (b.size() != total)
    fail("{}: {}length {} disagrees with the idx header, which declares {} bytes", path, kind,
         b.size(), total);
  IdxData d;
  d.type = IdxType(b[2]);
  int es = elem_size(b[2]);
  size_t head = 4 + 4 * size_t(b[3]);
  for (int i = 0; i < b[3]; ++i) d.dims.push_back(be32(&b[4 + 4 * size_t(i)]));
  d.data.assign(b.begin() + std::ptrdiff_t(head), b.end());
  for (size_t i = 0; es > 1 && i < d.data.size(); i += size_t(es))
    std::reverse(d.data.begin() + std::ptrdiff_t(i), d.data.begin() + std::ptrdiff_t(i) + es);
  return d;
}

ImageSet load_fashion_mnist(const std::string& dir, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    fail("{} is not a folder (the data folder holds the idx files)", dir);
  // Whether `p` exists; a folder that cannot be searched is unreadable, not "no such file".
  auto present = [&](const std::string& p) {
    if (::stat(p.c_str(), &st) == 0) return true;
    if (errno == ENOENT || errno == ENOTDIR) return false;
    fail("{}: cannot read the data folder {}: {}", p, dir, std::strerror(errno));
  };
  auto find = [&](const std::string& stem) {
    std::string gz = dir + "/" + stem + ".gz", plain = dir + "/" + stem;
    if (present(gz)) return gz;
    if (present(plain)) return plain;
    fail(
        "{}: no such file (Fashion-MNIST comes with the Debian package dataset-fashion-mnist, "
        "installed under {}; or point --data at a folder holding the files)",
        gz, kFashionMnistDir);
  };
  std::string ipath = find(prefix + "-images-idx3-ubyte");
  std::string lpath = find(prefix + "-labels-idx1-ubyte");
  IdxData im = read_idx(ipath), lb = read_idx(lpath);
  if (im.type != IdxType::u8 || im.dims.size() != 3)
    fail("{}: expected u8 images of rank 3, found type code {:02x} of rank {}", ipath, int(im.type),
         im.dims.size());
  if (lb.type != IdxType::u8 || lb.dims.size() != 1)
    fail("{}: expected u8 labels of rank 1, found type code {:02x} of rank {}", lpath, int(lb.type),
         lb.dims.size());
  if (im.dims[0] != lb.dims[0])
    fail("{} holds {} images but {} holds {} labels", ipath, im.dims[0], lpath, lb.dims[0]);
  if (im.dims[1] != 28 || im.dims[2] != 28)  // the models take 784 pixels, the CNN 28 x 28
    fail("{}: its images are {} x {}; Fashion-MNIST's are 28 x 28", ipath, im.dims[1], im.dims[2]);
  if (im.dims[0] == 0)
    fail("{}: holds no images (a {} set needs at least one)", ipath, train ? "training" : "test");
  ImageSet s;
  int64_t n = im.dims[0];
  s.rows = im.dims[1];
  s.cols = im.dims[2];
  s.images = Array(DType::f32, Shape{n, s.rows * s.cols});
  float* px = s.images.data<float>();
  for (size_t i = 0; i < im.data.size(); ++i) px[i] = float(im.data[i]) / 255.0f;
  s.labels = Array(DType::s32, Shape{n});
  int32_t* lab = s.labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (lb.data[size_t(i)] >= 10)
      fail("{}: label {} of sample {} is not a class in [0, 10)", lpath, int(lb.data[size_t(i)]),
           i);
    lab[i] = lb.data[size_t(i)];
  }
  return s;
}

}  // namespace tlaloc::io

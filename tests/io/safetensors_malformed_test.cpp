// One hand-made malformed file per refusal class; each must throw tlaloc::Error whose message
// names the tensor / field and the disagreeing numbers. The writer refuses the same things.
#include <gtest/gtest.h>

#include <cstring>

#include "io/io_test_util.h"
#include "tlaloc/io/safetensors.h"

namespace tlaloc::io {
namespace {

using testing::raw_file;
using testing::ScratchDir;
using testing::write_bytes;

// Parses in memory and through a real file; both must refuse with all `parts` in the message.
void expect_refused(const std::vector<std::byte>& file, std::vector<std::string> parts) {
  std::string msg;
  try {
    SafetensorsFile::parse(file, "mem.safetensors");
    ADD_FAILURE() << "accepted; expected an error mentioning " << parts[0];
    return;
  } catch (const Error& e) {
    msg = e.what();
  }
  for (const auto& p : parts)
    EXPECT_NE(msg.find(p), std::string::npos) << msg << "\n  lacks: " << p;
  ScratchDir dir;
  write_bytes(dir.file("bad.safetensors"), file);
  try {
    SafetensorsFile::open(dir.file("bad.safetensors"));
    ADD_FAILURE() << "open() accepted what parse() refused: " << msg;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
  }
}

std::vector<std::byte> zeros(size_t n) { return std::vector<std::byte>(n); }

std::string tensor(const std::string& name, const std::string& dtype, const std::string& shape,
                   uint64_t b, uint64_t e) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(e) + "]}";
}

TEST(SafetensorsMalformed, FileShorterThanTheLengthField) {
  expect_refused(zeros(5), {"5 bytes", "shorter than the 8-byte"});
}

TEST(SafetensorsMalformed, HeaderLengthAbsurd) {
  expect_refused(raw_file(100'000'008, "{}"), {"header length 100000008", "100000000"});
}

TEST(SafetensorsMalformed, HeaderLengthLargerThanTheFile) {
  expect_refused(raw_file(64, "{}      "), {"header length 64", "16 bytes", "72"});
}

// A text file read as safetensors: its first 8 bytes make an absurd length and no '{' follows.
TEST(SafetensorsMalformed, TextFileIsNamedNotASafetensorsFile) {
  std::string text = "root:x:0:0:root:/root:/bin/bash\n";
  std::vector<std::byte> file(text.size());
  std::memcpy(file.data(), text.data(), text.size());
  expect_refused(file, {"exceeds the limit", "not a safetensors file"});
  // A real header that is too long keeps the plain message (its byte 8 is '{').
  std::string msg;
  try {
    SafetensorsFile::parse(raw_file(100'000'008, "{}"), "mem.safetensors");
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg.find("not a safetensors file"), std::string::npos) << msg;
}

TEST(SafetensorsMalformed, HeaderLengthWrapsWhenAddedTo8) {
  expect_refused(raw_file(UINT64_MAX - 3, "{}"), {"18446744073709551612", "wraps"});
}

TEST(SafetensorsMalformed, HeaderNotUtf8) {
  expect_refused(raw_file("{\"a\xff\":{}}"), {"not valid UTF-8"});
}

TEST(SafetensorsMalformed, HeaderNotJson) {
  expect_refused(raw_file("{\"a\": {\"dtype\": \"F32\", "), {"not valid JSON"});
  expect_refused(raw_file("{} trailing"), {"not valid JSON"});
}

TEST(SafetensorsMalformed, HeaderNotAnObject) {
  expect_refused(raw_file("[1, 2, 3]"), {"an array, not a JSON object"});
  expect_refused(raw_file("\"str\"  "), {"a string, not a JSON object"});
}

TEST(SafetensorsMalformed, UnknownDType) {
  expect_refused(raw_file("{" + tensor("w", "F31", "[1]", 0, 4) + "}", zeros(4)),
                 {"tensor 'w'", "unknown dtype 'F31'"});
}

TEST(SafetensorsMalformed, ShapeElementCountOverflows64Bits) {
  expect_refused(raw_file("{" + tensor("big", "U8", "[4294967296,4294967296]", 0, 0) + "}"),
                 {"tensor 'big'", "[4294967296,4294967296]", "overflows 64 bits"});
  // Element count fits but the byte size does not.
  expect_refused(raw_file("{" + tensor("big", "F64", "[4611686018427387904]", 0, 0) + "}"),
                 {"tensor 'big'", "byte size", "overflows 64 bits"});
}

TEST(SafetensorsMalformed, ShapeNotNonNegativeIntegers) {
  expect_refused(raw_file("{" + tensor("s", "U8", "[2,-1]", 0, 0) + "}"),
                 {"tensor 's'", "shape", "-1"});
  expect_refused(raw_file("{" + tensor("s", "U8", "[2.0]", 0, 2) + "}", zeros(2)),
                 {"tensor 's'", "a float"});
  expect_refused(raw_file("{" + tensor("s", "U8", "{}", 0, 2) + "}", zeros(2)),
                 {"tensor 's'", "shape is an object"});
  expect_refused(raw_file("{" + tensor("s", "U8", "[9223372036854775808,0]", 0, 0) + "}"),
                 {"tensor 's'", "9223372036854775808", "2^63-1"});
}

TEST(SafetensorsMalformed, DataOffsetsReversed) {
  expect_refused(raw_file("{" + tensor("r", "U8", "[4]", 8, 4) + "}", zeros(8)),
                 {"tensor 'r'", "[8, 4]", "reversed"});
}

TEST(SafetensorsMalformed, DataOffsetsOutOfRange) {
  expect_refused(raw_file("{" + tensor("o", "F32", "[4]", 0, 16) + "}", zeros(12)),
                 {"tensor 'o'", "[0, 16]", "12 bytes"});
}

TEST(SafetensorsMalformed, DataOffsetsOverlap) {
  expect_refused(
      raw_file("{" + tensor("a", "F32", "[2]", 0, 8) + "," + tensor("b", "F32", "[2]", 4, 12) + "}",
               zeros(12)),
      {"'a' and 'b' overlap", "4", "8"});
}

TEST(SafetensorsMalformed, DataOffsetsLeaveGaps) {
  // Between tensors.
  expect_refused(
      raw_file("{" + tensor("a", "U8", "[2]", 0, 2) + "," + tensor("b", "U8", "[2]", 4, 6) + "}",
               zeros(6)),
      {"bytes [2, 4)", "before 'b'"});
  // Before the first tensor.
  expect_refused(raw_file("{" + tensor("a", "U8", "[2]", 2, 4) + "}", zeros(4)),
                 {"bytes [0, 2)", "before 'a'"});
  // After the last tensor (trailing bytes), and data with no tensor at all.
  expect_refused(raw_file("{" + tensor("a", "U8", "[2]", 0, 2) + "}", zeros(5)),
                 {"bytes [2, 5)", "end of the data section"});
  expect_refused(raw_file("{}", zeros(3)), {"bytes [0, 3)"});
}

TEST(SafetensorsMalformed, DataLengthDisagreesWithShapeAndDType) {
  expect_refused(raw_file("{" + tensor("w", "F32", "[2,3]", 0, 20) + "}", zeros(20)),
                 {"tensor 'w'", "20 bytes", "[2,3]", "F32", "needs 24"});
  // Sub-byte kinds must fill whole bytes.
  expect_refused(raw_file("{" + tensor("q", "F4", "[3]", 0, 2) + "}", zeros(2)),
                 {"tensor 'q'", "12 bits"});
}

TEST(SafetensorsMalformed, DuplicateNames) {
  expect_refused(
      raw_file("{" + tensor("d", "U8", "[1]", 0, 1) + "," + tensor("d", "U8", "[1]", 1, 2) + "}",
               zeros(2)),
      {"'d' twice"});
  // Duplicate fields inside one tensor's entry too.
  expect_refused(raw_file("{\"d\":{\"dtype\":\"U8\",\"dtype\":\"I8\",\"shape\":[1],"
                          "\"data_offsets\":[0,1]}}",
                          zeros(1)),
                 {"'dtype' twice"});
}

TEST(SafetensorsMalformed, TensorNamedMetadata) {
  expect_refused(raw_file("{" + tensor("__metadata__", "U8", "[1]", 0, 1) + "}", zeros(1)),
                 {"__metadata__", "reserved"});
}

TEST(SafetensorsMalformed, NonStringMetadataValues) {
  expect_refused(raw_file("{\"__metadata__\":{\"ok\":\"x\",\"step\":100}}"),
                 {"'step'", "an integer", "100", "not a string"});
  expect_refused(raw_file("{\"__metadata__\":{\"l\":[\"a\"]}}"), {"'l'", "an array"});
  expect_refused(raw_file("{\"__metadata__\":\"x\"}"), {"__metadata__ is a string"});
}

TEST(SafetensorsMalformed, MissingAndUnknownFields) {
  expect_refused(raw_file("{\"m\":{\"dtype\":\"U8\",\"shape\":[1]}}", zeros(1)),
                 {"tensor 'm'", "missing field 'data_offsets'"});
  expect_refused(raw_file("{\"m\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
                          "\"extra\":1}}",
                          zeros(1)),
                 {"tensor 'm'", "unknown field 'extra'"});
  expect_refused(
      raw_file("{\"m\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", zeros(1)),
      {"tensor 'm'", "data_offsets", "[0]"});
  expect_refused(raw_file("{\"m\":5}"), {"tensor 'm'", "an integer, not an object"});
}

TEST(SafetensorsMalformed, NestingDeeperThanTheFormat) {
  std::string deep(10000, '[');
  expect_refused(raw_file("{\"a\":{\"shape\":" + deep + "}}"), {"nests deeper"});
}

// ---- the writer refuses what the reader refuses ----

TEST(SafetensorsWriterRefuses, WhatTheReaderRefuses) {
  Array a = Array::from<float>(Shape{2}, {1.0f, 2.0f});
  auto refuses = [](std::vector<TensorRef> refs, std::map<std::string, std::string> md,
                    const std::string& part) {
    try {
      serialize(std::move(refs), md);
      ADD_FAILURE() << "writer accepted; expected " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refuses({tensor_ref("x", a), tensor_ref("x", a)}, {}, "two tensors are named 'x'");
  refuses({tensor_ref("__metadata__", a)}, {}, "'__metadata__'");
  refuses({tensor_ref("bad\xff", a)}, {}, "not valid UTF-8");
  refuses({tensor_ref("x", a)}, {{"k", "\xc0\x80"}}, "value of 'k' is not valid UTF-8");
  auto span = std::span<const std::byte>(static_cast<const std::byte*>(a.raw()), 8);
  refuses({TensorRef{"short", StDType::F32, {3}, span}}, {}, "tensor 'short' has 8 bytes");
  refuses({TensorRef{"neg", StDType::F32, {-2}, span}}, {}, "negative dimension -2");
  refuses({TensorRef{"huge", StDType::U8, {INT64_MAX, INT64_MAX}, span}}, {}, "overflows");
  refuses({TensorRef{"q", StDType::F4, {3}, span.subspan(0, 1)}}, {}, "12 bits");
  refuses({}, {{"big", std::string(kMaxHeaderSize, 'x')}}, "over the header limit of 100000000");
  // Just under the limit in raw length, over it once JSON-escaped (each \n becomes two bytes).
  refuses({}, {{"nl", std::string(kMaxHeaderSize / 2 + 8, '\n')}},
          "exceeds the limit of 100000000");
}

}  // namespace
}  // namespace tlaloc::io

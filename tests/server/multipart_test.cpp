// parse_multipart / multipart_boundary: parameters (quoted, with ';', any case), binary data
// with CRLF and dashes, header-less parts, a preamble and an epilogue, refused dispositions.
#include <gtest/gtest.h>

#include "server/multipart.h"

namespace keel::server {
namespace {

TEST(MultipartTest, PartsBoundaryAndBinaryData) {
  ApiResult<std::string> b =
      multipart_boundary("Multipart/Form-Data; charset=utf-8; boundary=\"abc;def\"");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value(), "abc;def");
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=").ok());
  EXPECT_FALSE(multipart_boundary("text/plain; boundary=x").ok());

  const std::string binary("a\0b\r\nc--X", 9);
  const std::string body =
      "--X\r\nContent-Disposition: form-data; name=\"file\"; "
      "filename=\"f.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n" +
      binary +
      "\r\n--X\r\ncontent-disposition: form-data; name=purpose\r\n\r\n"
      "batch\r\n--X--\r\nepilogue";
  ApiResult<std::vector<MultipartPart>> parts = parse_multipart(body, "X");
  ASSERT_TRUE(parts.ok()) << parts.error().message;
  ASSERT_EQ(parts.value().size(), 2u);
  EXPECT_EQ(parts.value()[0].name, "file");
  EXPECT_EQ(parts.value()[0].filename, "f.bin");
  EXPECT_EQ(parts.value()[0].content_type, "application/octet-stream");
  EXPECT_EQ(parts.value()[0].data, binary);
  EXPECT_EQ(parts.value()[1].name, "purpose");
  EXPECT_FALSE(parts.value()[1].filename.has_value());
  EXPECT_EQ(parts.value()[1].data, "batch");
  EXPECT_FALSE(
      parse_multipart("--X\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--X--", "X")
          .ok());
}

}  // namespace
}  // namespace keel::server

// Sha256: SHA-256 over a stream of bytes (OpenSSL's EVP), and of a whole file; digests as 64
// lowercase hex characters, the form Hugging Face's X-Linked-ETag and `sha256sum` use.
// Thread safety: one Sha256 per thread; the free functions are reentrant.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/file_system.h"
#include "core/result.h"

namespace keel::pull {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::span<const std::byte> bytes);
  // The digest of everything given so far, as hex; the object is then spent.
  std::string finish_hex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// The hex digest of the file at `path`.
Result<std::string> sha256_file(FileSystem& fs, const std::string& path);
// True when `s` is 64 hex characters (either case).
[[nodiscard]] bool is_sha256_hex(std::string_view s);

}  // namespace keel::pull

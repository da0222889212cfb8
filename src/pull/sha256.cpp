// Sha256 (see sha256.h) on OpenSSL's EVP digest interface.
#include "pull/sha256.h"

#include <openssl/evp.h>

#include <vector>

#include "core/check.h"

namespace keel::pull {

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  // Fails only when OpenSSL is out of memory, as any allocation would.
  KEEL_CHECK(ctx_->md != nullptr && EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1);
}

Sha256::~Sha256() = default;

void Sha256::update(std::span<const std::byte> bytes) {
  EVP_DigestUpdate(ctx_->md, bytes.data(), bytes.size());
}

std::string Sha256::finish_hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx_->md, digest, &n);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

Result<std::string> sha256_file(FileSystem& fs, const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, fs.open_readable(path));
  Sha256 hash;
  std::vector<std::byte> buf(size_t{4} << 20);
  for (uint64_t offset = 0; offset < f->size();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), f->size() - offset));
    KEEL_TRY(f->read_at(offset, n, buf.data()));
    hash.update({buf.data(), n});
    offset += n;
  }
  return hash.finish_hex();
}

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (const char c : s) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex) return false;
  }
  return true;
}

}  // namespace keel::pull

// Checked access to keel's own small GGUF files (draft heads, length predictors): F32 tensors of an
// exact shape and metadata keys within bounds. Every error is InvalidArgument and reads
// "<kind> <path>: <what>", where `kind` names the sort of file ("draft head", "predictor file"),
// so a user knows which file to fix.
// Thread safety: pure functions over a file the caller owns.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "gguf/reader.h"
#include "gguf/writer.h"

namespace keel::gguf {

[[nodiscard]] Status file_error(std::string_view kind, const std::string& path,
                                const std::string& what);

// Opens `path` as one of keel's own files: general.architecture must be `arch` ("not a keel
// <kind>" otherwise) and `version_key` must equal `version`. NotFound and IoError pass through as
// they are; every other failure is a file_error.
[[nodiscard]] Result<GgufFile> open_keel_file(const std::string& path, std::string_view kind,
                                              std::string_view arch, const std::string& version_key,
                                              int64_t version);

// Adds `v` as an F32 tensor of `shape` (the caller keeps `v` alive until the writer is done).
[[nodiscard]] Status add_f32_tensor(GgufWriter& w, const std::string& name,
                                    const std::vector<float>& v, std::vector<int64_t> shape);

// Copies tensor `name`, which must exist as F32 of exactly `shape`, into *out.
[[nodiscard]] Status read_f32_tensor(const GgufFile& f, std::string_view kind,
                                     const std::string& name, const std::vector<int64_t>& shape,
                                     std::vector<float>* out);

// Integer key within [lo, hi].
[[nodiscard]] Result<int64_t> read_int_key(const GgufFile& f, std::string_view kind,
                                           const std::string& key, int64_t lo, int64_t hi);
[[nodiscard]] Result<double> read_float_key(const GgufFile& f, std::string_view kind,
                                            const std::string& key);
[[nodiscard]] Result<std::string> read_string_key(const GgufFile& f, std::string_view kind,
                                                  const std::string& key);

}  // namespace keel::gguf

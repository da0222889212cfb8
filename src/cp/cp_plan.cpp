// The context-parallel group's placement of positions (see cp_plan.h).
#include "cp/cp_plan.h"

#include <algorithm>

#include "core/check.h"

namespace keel::cp {

std::vector<std::vector<int32_t>> zigzag_split(int32_t begin, int32_t end, int n_members) {
  KEEL_CHECK(n_members >= 1 && begin <= end);
  const int n_chunks = 2 * n_members;
  const int32_t len = end - begin, base = len / n_chunks, extra = len % n_chunks;
  std::vector<int32_t> chunk_begin(static_cast<size_t>(n_chunks) + 1, begin);
  for (int c = 0; c < n_chunks; ++c) {
    chunk_begin[static_cast<size_t>(c) + 1] =
        chunk_begin[static_cast<size_t>(c)] + base + (c < extra ? 1 : 0);
  }
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n_members));
  for (int i = 0; i < n_members; ++i) {
    for (int c : {i, n_chunks - 1 - i}) {
      for (int32_t p = chunk_begin[static_cast<size_t>(c)];
           p < chunk_begin[static_cast<size_t>(c) + 1]; ++p) {
        out[static_cast<size_t>(i)].push_back(p);
      }
    }
  }
  return out;
}

int decode_owner(std::span<const int64_t> shard_sizes) {
  KEEL_CHECK(!shard_sizes.empty());
  return static_cast<int>(std::min_element(shard_sizes.begin(), shard_sizes.end()) -
                          shard_sizes.begin());
}

}  // namespace keel::cp

// PIC link planning (see pic.h).
#include "kv/pic.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <numeric>

namespace keel::kv {
namespace {

bool parse_int(std::string_view s, int32_t lo, int32_t hi, int32_t* out) {
  int32_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty() || v < lo || v > hi) {
    return false;
  }
  *out = v;
  return true;
}

}  // namespace

std::string PicVariant::name() const {
  switch (mode) {
    case PicMode::kFull:
      return "full";
    case PicMode::kNaive:
      return "naive";
    case PicMode::kLegoLink:
      return "legolink-" + std::to_string(k);
    case PicMode::kCacheBlend:
      return "cacheblend-" + std::to_string(percent);
  }
  return "?";
}

Result<PicVariant> PicVariant::parse(std::string_view text) {
  PicVariant v;
  if (text == "full") {
    v.mode = PicMode::kFull;
    return v;
  }
  if (text == "naive") {
    v.mode = PicMode::kNaive;
    return v;
  }
  constexpr std::string_view kLego = "legolink-", kBlend = "cacheblend-";
  if (text.starts_with(kLego) && parse_int(text.substr(kLego.size()), 0, 4096, &v.k)) {
    v.mode = v.k == 0 ? PicMode::kNaive : PicMode::kLegoLink;
    return v;
  }
  if (text.starts_with(kBlend) && parse_int(text.substr(kBlend.size()), 0, 100, &v.percent)) {
    v.mode = PicMode::kCacheBlend;
    return v;
  }
  return Status::invalid_argument("unknown PIC link variant '" + std::string(text.substr(0, 64)) +
                                  "' (expected full, naive, legolink-K with K in [0, 4096] or "
                                  "cacheblend-R with R in [0, 100])");
}

Status validate_pic_chunks(std::span<const PicChunk> chunks, int32_t n) {
  int32_t end = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const PicChunk& c = chunks[i];
    if (c.len < 1 || c.start < end || c.start > n - c.len) {
      return Status::invalid_argument(
          "PIC chunk " + std::to_string(i) + " [" + std::to_string(c.start) + ", +" +
          std::to_string(c.len) + ") is empty, overlaps the previous one or leaves the prompt of " +
          std::to_string(n) + " tokens");
    }
    end = c.start + c.len;
  }
  return Status::ok_status();
}

PicLinkPlan plan_pic_link(int32_t n, int32_t hit, std::span<const PicChunk> chunks,
                          const PicVariant& variant) {
  PicLinkPlan plan;
  plan.linked_end = hit;
  if (chunks.empty() || variant.mode == PicMode::kFull) return plan;
  const int32_t last_end = chunks.back().start + chunks.back().len;
  const int32_t end = std::min(last_end, n - 1);
  if (end <= hit) return plan;
  plan.linked_end = end;
  // from_chunk[p - hit]: 0 = gap, 1 = linked, 2 = recomputed chunk position.
  std::vector<uint8_t> kind(static_cast<size_t>(end - hit), 0);
  for (const PicChunk& c : chunks) {
    const int32_t k = variant.mode == PicMode::kLegoLink && c.start > 0 ? variant.k : 0;
    for (int32_t p = std::max(c.start, hit); p < std::min(c.start + c.len, end); ++p) {
      kind[static_cast<size_t>(p - hit)] = p - c.start < k ? 2 : 1;
      if (c.start > 0 && kind[static_cast<size_t>(p - hit)] == 1) {
        plan.blend_candidates.push_back(p);
      }
    }
  }
  for (int32_t p = hit; p < end; ++p) {
    (kind[static_cast<size_t>(p - hit)] == 1 ? plan.linked : plan.recompute).push_back(p);
  }
  return plan;
}

std::vector<int32_t> select_by_deviation(std::span<const int32_t> positions,
                                         std::span<const float> deviation, int32_t percent) {
  const size_t want = (positions.size() * static_cast<size_t>(percent) + 99) / 100;
  std::vector<size_t> order(positions.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return deviation[a] > deviation[b]; });
  std::vector<int32_t> out;
  for (size_t i = 0; i < want && i < order.size(); ++i) out.push_back(positions[order[i]]);
  std::sort(out.begin(), out.end());
  return out;
}

void recompute_also(PicLinkPlan* plan, std::span<const int32_t> positions) {
  std::vector<int32_t> linked;
  for (int32_t p : plan->linked) {
    if (!std::binary_search(positions.begin(), positions.end(), p)) linked.push_back(p);
  }
  plan->linked = std::move(linked);
  plan->recompute = merge_positions(plan->recompute, positions);
}

std::vector<int32_t> merge_positions(std::span<const int32_t> a, std::span<const int32_t> b) {
  std::vector<int32_t> merged;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(merged));
  return merged;
}

}  // namespace keel::kv

// PreTokenizer over PCRE2 (see pre_tokenizer.h).
//
// Compile options: PCRE2_UTF | PCRE2_UCP (\s, \d, \w are Unicode-aware; \p{..} always is) and
// PCRE2_DOLLAR_ENDONLY, because the regexes were written for engines where `$` matches only at
// the very end. Subjects are validated UTF-8, so matching passes PCRE2_NO_UTF_CHECK (otherwise
// every call would re-check the whole piece and long inputs would cost quadratic time).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <string>

#include "core/log.h"
#include "tokenizer/utf8.h"

namespace keel::tokenizer {

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  bool jit = false;
  std::string pattern;

  Regex() = default;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex() { pcre2_code_free(code); }
};

namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

bool jit_available() {
  uint32_t jit = 0;
  return pcre2_config(PCRE2_CONFIG_JIT, &jit) >= 0 && jit == 1;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  return n < 0 ? "unknown PCRE2 error " + std::to_string(code)
               : std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// Runs one match from `start`; retries without JIT when the JIT stack runs out. Returns the
// PCRE2 result code.
int match_once(const pcre2_code* code, bool jit, std::string_view subject, size_t start,
               pcre2_match_data* md) {
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = pcre2_match(code, s, subject.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
  if (jit && rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    rc =
        pcre2_match(code, s, subject.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
  }
  return rc;
}

// Splits one piece with one regex, appending the sub-pieces to `out`.
void split_piece(const pcre2_code* code, bool jit, std::string_view piece, pcre2_match_data* md,
                 std::vector<std::string_view>* out) {
  size_t pos = 0;
  size_t done = 0;  // end of the last emitted sub-piece
  while (pos < piece.size()) {
    const int rc = match_once(code, jit, piece, pos, md);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      // A resource limit: keep the rest unsplit rather than fail the whole encode.
      KEEL_LOG_WARN("pre-tokenizer regex gave up on a {}-byte piece: {}", piece.size(),
                    pcre2_message(rc));
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (begin > done) out->push_back(piece.substr(done, begin - done));
    done = begin;
    if (end == begin) {  // empty match: step over one code point
      pos = begin + utf8_sequence_length(static_cast<uint8_t>(piece[begin]));
      continue;
    }
    out->push_back(piece.substr(begin, end - begin));
    done = end;
    pos = end;
  }
  if (done < piece.size()) out->push_back(piece.substr(done));
}

}  // namespace

Result<PreTokenizer> PreTokenizer::create(PreTokenizerKind kind) {
  return create(pre_tokenizer_regexes(kind));
}

Result<PreTokenizer> PreTokenizer::create(std::span<const std::string_view> regexes) {
  PreTokenizer pt;
  const bool try_jit = jit_available();
  pt.uses_jit_ = try_jit;
  for (std::string_view pattern : regexes) {
    auto regex = std::make_shared<Regex>();
    regex->pattern = std::string(pattern);
    int error = 0;
    PCRE2_SIZE offset = 0;
    regex->code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &offset, nullptr);
    if (regex->code == nullptr) {
      return Status::invalid_argument("pre-tokenizer regex '" + std::string(pattern) +
                                      "' does not compile at offset " + std::to_string(offset) +
                                      ": " + pcre2_message(error));
    }
    regex->jit = try_jit && pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE) == 0;
    pt.uses_jit_ = pt.uses_jit_ && regex->jit;
    pt.regexes_.push_back(std::move(regex));
  }
  return pt;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>* pieces) const {
  if (text.empty()) return;
  MatchData md(pcre2_match_data_create(1, nullptr));
  KEEL_CHECK_MSG(md != nullptr, "out of memory creating PCRE2 match data");
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (const auto& regex : regexes_) {
    next.clear();
    next.reserve(current.size() * 2);
    for (std::string_view piece : current)
      split_piece(regex->code, regex->jit, piece, md.get(), &next);
    current.swap(next);
  }
  pieces->insert(pieces->end(), current.begin(), current.end());
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  split(text, &pieces);
  return pieces;
}

}  // namespace keel::tokenizer

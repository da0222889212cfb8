// Tokenizer: loading (vocabulary, pre-tokenizer, special-token trie, piece cache), encode
// (partition, then SPM or BPE per raw fragment, then BOS/EOS), and decode (pieces, first-space
// strip, clean_spaces, UTF-8 repair). See tokenizer.h for the contract.
// Thread safety: Impl is immutable after from_vocab(); all methods are const.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "tokenizer/bpe_encoder.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/space_cleaner.h"
#include "tokenizer/special_partition.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/utf8.h"

namespace keel::tokenizer {

struct Tokenizer::Impl {
  Vocab vocab;
  std::optional<PreTokenizer> pre_tokenizer;  // BPE only
  SpecialTokenMatcher matcher;
  ByteTokens byte_tokens{};         // SPM byte fallback
  std::vector<std::string> pieces;  // token_to_piece(id, render_special = true)
  size_t max_token_bytes = 0;       // see token_cover_bound(); 0 = no bound
  bool strip_specials = false;      // a special token swallows adjacent whitespace
};

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

// "<0xAB>" -> 0xAB.
std::optional<uint8_t> parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  unsigned value = 0;
  for (char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= static_cast<unsigned>(c - '0');
    } else if (c >= 'A' && c <= 'F') {
      value |= static_cast<unsigned>(c - 'A' + 10);
    } else if (c >= 'a' && c <= 'f') {
      value |= static_cast<unsigned>(c - 'a' + 10);
    } else {
      return std::nullopt;
    }
  }
  return static_cast<uint8_t>(value);
}

std::string make_piece(const Vocab& v, const TokenData& t) {
  const uint32_t verbatim =
      bit(TokenAttr::kUnknown) | bit(TokenAttr::kControl) | bit(TokenAttr::kUserDefined);
  if (t.attrs & verbatim) return t.text;
  if (t.attrs & bit(TokenAttr::kNormal)) {
    if (v.type == VocabType::kSpm) return replace_all(t.text, kSpmSpace, " ");
    return byte_level_decode(t.text);
  }
  if (t.attrs & bit(TokenAttr::kByte)) {
    if (auto b = parse_byte_token(t.text)) return std::string(1, static_cast<char>(*b));
    return t.text;  // a byte token not spelled <0xXX>: render its text
  }
  return "";  // unused / undefined tokens
}

// The invariants of a loaded Vocab (see vocab.h), checked for vocabularies built by hand.
Status check_vocab(const Vocab& v) {
  const auto bad = [](const std::string& what) {
    return Status::invalid_argument("tokenizer: inconsistent vocabulary: " + what);
  };
  if (v.tokens.empty()) return bad("no tokens");
  if (v.token_to_id.size() != v.tokens.size()) return bad("token_to_id does not match tokens");
  for (const auto& [text, id] : v.token_to_id) {
    if (!v.valid(id) || v.tokens[static_cast<size_t>(id)].text != text) {
      return bad("token_to_id maps '" + text + "' wrongly");
    }
  }
  const SpecialTokenIds& s = v.special;
  for (TokenId id : {s.bos, s.eos, s.eot, s.eom, s.unk, s.sep, s.pad, s.mask, s.fim_pre, s.fim_suf,
                     s.fim_mid, s.fim_pad, s.fim_rep, s.fim_sep}) {
    if (id != kNoToken && !v.valid(id)) return bad("special id " + std::to_string(id));
  }
  for (TokenId id : v.eog_ids) {
    if (!v.valid(id)) return bad("EOG id " + std::to_string(id));
  }
  if (!std::is_sorted(v.eog_ids.begin(), v.eog_ids.end())) return bad("eog_ids not sorted");
  for (TokenId id : v.special_cache) {
    if (!v.valid(id)) return bad("special-cache id " + std::to_string(id));
  }
  if (v.add_bos && s.bos == kNoToken) return bad("add_bos without a BOS token");
  if (v.add_eos && s.eos == kNoToken) return bad("add_eos without an EOS token");
  return Status();
}

ByteTokens make_byte_tokens(const Vocab& v) {
  ByteTokens table{};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    TokenId id = v.find(hex);
    if (id == kNoToken) id = v.find(std::string(1, static_cast<char>(b)));
    if (id == kNoToken) id = v.special.unk;
    table[static_cast<size_t>(b)] = id;
  }
  return table;
}

// The most input bytes one token of encode() can cover, or 0 when no bound holds. Each token
// covers either a vocabulary text exactly — SPM: a piece of the input with spaces written as
// U+2581 (3 bytes for 1), BPE: a piece of the byte-level text, 1 or 2 bytes per input byte,
// special tokens: their own text — or a single byte (SPM byte fallback, BPE's per-byte fallback
// for a merged symbol missing from the vocabulary), so its input is never longer than the
// longest vocabulary text. (Server input is valid UTF-8, which the lenient normalization leaves
// unchanged.) The bound fails where a byte can yield no token at all: an SPM vocabulary with
// neither a byte token nor UNK for some byte, a BPE one missing a byte-level character (its
// fallback drops the byte); then there is none.
size_t token_cover_bound(const Vocab& v, const ByteTokens& byte_tokens) {
  size_t longest = 1;
  for (const TokenData& t : v.tokens) longest = std::max(longest, t.text.size());
  if (v.type == VocabType::kSpm) {
    for (TokenId id : byte_tokens) {
      if (id == kNoToken) return 0;
    }
    return longest;
  }
  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    std::string one;
    byte_level_encode(std::string_view(&byte, 1), &one);
    if (v.find(one) == kNoToken) return 0;
  }
  return longest;
}

bool has_strip_specials(const Vocab& v) {
  const uint32_t strip = bit(TokenAttr::kLstrip) | bit(TokenAttr::kRstrip);
  for (TokenId id : v.special_cache) {
    if (v.tokens[static_cast<size_t>(id)].attrs & strip) return true;
  }
  return false;
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  KEEL_ASSIGN_OR_RETURN(Vocab vocab, load_vocab(file));
  return from_vocab(std::move(vocab));
}

Result<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  auto impl = std::make_shared<Impl>();
  impl->vocab = std::move(vocab);
  const Vocab& v = impl->vocab;
  KEEL_TRY(check_vocab(v));
  if (v.type == VocabType::kBpe) {
    KEEL_ASSIGN_OR_RETURN(PreTokenizer pt, PreTokenizer::create(v.pre_kind));
    impl->pre_tokenizer = std::move(pt);
  }
  impl->matcher = SpecialTokenMatcher(v);
  impl->byte_tokens = make_byte_tokens(v);
  impl->max_token_bytes = token_cover_bound(v, impl->byte_tokens);
  impl->strip_specials = has_strip_specials(v);
  impl->pieces.reserve(v.tokens.size());
  for (const TokenData& t : v.tokens) impl->pieces.push_back(make_piece(v, t));
  return Tokenizer(std::move(impl));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return encode_spans(text, add_special, parse_special, {});
}

std::vector<TokenId> Tokenizer::encode(const TrackedText& text, bool add_special,
                                       bool parse_special) const {
  return encode_spans(text.text, add_special, parse_special, text.plain);
}

size_t Tokenizer::max_token_bytes() const { return impl_->max_token_bytes; }

size_t Tokenizer::min_tokens(std::string_view text) const {
  if (impl_->max_token_bytes == 0) return 0;
  size_t n = text.size();
  if (impl_->strip_specials) {  // whitespace swallowed by a special token costs no token
    n = static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
      return !(c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r');
    }));
  }
  return n / impl_->max_token_bytes;
}

std::vector<TokenId> Tokenizer::encode_spans(std::string_view text, bool add_special,
                                             bool parse_special, const TextSpans& plain) const {
  const Vocab& v = impl_->vocab;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && v.add_bos) out.push_back(v.special.bos);
  const std::vector<Fragment> fragments = impl_->matcher.partition(v, text, parse_special, plain);
  bool prev_special = true;  // SPM: the first fragment gets the space prefix too
  std::string buffer;
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.offset, f.length);
    if (v.type == VocabType::kSpm) {
      buffer.clear();
      if (v.add_space_prefix && prev_special) buffer.push_back(' ');
      buffer.append(raw);
      spm_encode(v, impl_->byte_tokens, replace_all(buffer, " ", kSpmSpace), &out);
    } else {
      bpe_encode(v, *impl_->pre_tokenizer, raw, &out);
    }
    prev_special = false;
  }
  if (add_special && v.add_eos) out.push_back(v.special.eos);
  return out;
}

std::string_view Tokenizer::piece_view(TokenId id, bool render_special) const {
  const Vocab& v = impl_->vocab;
  if (!v.valid(id)) return {};
  const uint32_t hidden = bit(TokenAttr::kUnknown) | bit(TokenAttr::kControl);
  if (!render_special && (v.tokens[static_cast<size_t>(id)].attrs & hidden)) return {};
  return impl_->pieces[static_cast<size_t>(id)];
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
  return std::string(piece_view(id, render_special));
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool render_special) const {
  std::string raw;
  bool strip_space = impl_->vocab.add_space_prefix;
  for (TokenId id : ids) {
    std::string_view piece = piece_view(id, render_special);
    if (strip_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    strip_space = false;
    raw.append(piece);
  }
  if (impl_->vocab.clean_spaces) raw = clean_spaces_batch(raw);
  return sanitize_utf8(raw);
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }
VocabType Tokenizer::type() const { return impl_->vocab.type; }
TokenId Tokenizer::bos_id() const { return impl_->vocab.special.bos; }
TokenId Tokenizer::eos_id() const { return impl_->vocab.special.eos; }
TokenId Tokenizer::eot_id() const { return impl_->vocab.special.eot; }
TokenId Tokenizer::eom_id() const { return impl_->vocab.special.eom; }
TokenId Tokenizer::unk_id() const { return impl_->vocab.special.unk; }
TokenId Tokenizer::pad_id() const { return impl_->vocab.special.pad; }
const SpecialTokenIds& Tokenizer::special_ids() const { return impl_->vocab.special; }

bool Tokenizer::is_eog(TokenId id) const {
  const auto& eog = impl_->vocab.eog_ids;
  return std::binary_search(eog.begin(), eog.end(), id);
}

std::span<const TokenId> Tokenizer::eog_ids() const { return impl_->vocab.eog_ids; }

bool Tokenizer::is_control(TokenId id) const {
  return impl_->vocab.valid(id) && impl_->vocab.has_attr(id, TokenAttr::kControl);
}

bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::add_eos() const { return impl_->vocab.add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->vocab.add_space_prefix; }
bool Tokenizer::clean_spaces() const { return impl_->vocab.clean_spaces; }
std::string_view Tokenizer::model_name() const { return impl_->vocab.model; }
std::string_view Tokenizer::pre_name() const { return impl_->vocab.pre; }

std::string_view Tokenizer::token_text(TokenId id) const {
  if (!impl_->vocab.valid(id)) return {};
  return impl_->vocab.tokens[static_cast<size_t>(id)].text;
}

TokenId Tokenizer::find_token(std::string_view text) const { return impl_->vocab.find(text); }
const Vocab& Tokenizer::vocab() const { return impl_->vocab; }

}  // namespace keel::tokenizer

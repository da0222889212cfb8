// A MessagePack document read with bounded nesting; see bounded_msgpack.h.
#include "net/bounded_msgpack.h"

#include <exception>
#include <string>

namespace keel::net {
namespace {

using Json = nlohmann::json;

// Builds the document like nlohmann's own DOM parser, but refuses nesting deeper than max_depth_
// before descending (the binary reader recurses once per level).
class BoundedSax final : public nlohmann::json_sax<Json> {
 public:
  BoundedSax(Json* root, int max_depth)
      : dom_(*root, /*allow_exceptions=*/false), max_depth_(max_depth) {}

  bool null() override { return dom_.null(); }
  bool boolean(bool v) override { return dom_.boolean(v); }
  bool number_integer(number_integer_t v) override { return dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) override { return dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) override {
    return dom_.number_float(v, s);
  }
  bool string(string_t& v) override { return dom_.string(v); }
  bool binary(binary_t& v) override { return dom_.binary(v); }
  bool start_object(std::size_t n) override { return enter() && dom_.start_object(n); }
  bool key(string_t& v) override { return dom_.key(v); }
  bool end_object() override {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) override { return enter() && dom_.start_array(n); }
  bool end_array() override {
    --depth_;
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& token,
                   const nlohmann::detail::exception& e) override {
    error_ = e.what();
    return dom_.parse_error(pos, token, e);
  }

  [[nodiscard]] bool too_deep() const { return too_deep_; }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  bool enter() {
    if (++depth_ > max_depth_) {
      too_deep_ = true;
      return false;
    }
    return true;
  }
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
  std::string error_;
};

}  // namespace

Result<Json> parse_bounded_msgpack(std::span<const uint8_t> bytes, int max_depth) {
  Json doc;
  BoundedSax sax(&doc, max_depth);
  bool parsed = false;
  try {
    parsed = Json::sax_parse(bytes.begin(), bytes.end(), &sax, Json::input_format_t::msgpack,
                             /*strict=*/true);
  } catch (const std::exception& e) {  // nlohmann reports through the SAX; this is a backstop
    return Status::invalid_argument(std::string("not MessagePack: ") + e.what());
  }
  if (sax.too_deep()) {
    return Status::invalid_argument("nesting deeper than " + std::to_string(max_depth) + " levels");
  }
  if (!parsed) return Status::invalid_argument("not MessagePack: " + sax.error());
  return doc;
}

}  // namespace keel::net

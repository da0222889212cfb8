// TrainState's binary form (train_state.h).
#include "train/train_state.h"

#include <cstring>

namespace keel::train {
namespace {

constexpr std::string_view kMagic = "KEELFTS1";
constexpr uint32_t kVersion = 1;

// Little-endian on every platform keel runs on (x86-64, aarch64): values are copied as bytes.
template <typename T>
void put(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out->append(b, sizeof(T));
}

void put_floats(std::string* out, const std::vector<float>& v) {
  put<uint64_t>(out, v.size());
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}
  template <typename T>
  bool get(T* v) {
    if (rest_.size() < sizeof(T)) return false;
    std::memcpy(v, rest_.data(), sizeof(T));
    rest_.remove_prefix(sizeof(T));
    return true;
  }
  bool get_floats(std::vector<float>* v) {
    uint64_t n = 0;
    if (!get(&n) || n > rest_.size() / sizeof(float)) return false;
    v->resize(n);
    std::memcpy(v->data(), rest_.data(), n * sizeof(float));
    rest_.remove_prefix(n * sizeof(float));
    return true;
  }
  [[nodiscard]] bool done() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

}  // namespace

std::string encode_train_state(const TrainState& s) {
  std::string out(kMagic);
  put(&out, kVersion);
  put(&out, s.seed);
  put(&out, s.epochs);
  put(&out, s.batch_size);
  put(&out, s.num_examples);
  put(&out, s.step);
  put(&out, s.epoch);
  put(&out, s.next_example);
  put(&out, s.trained_tokens);
  put(&out, s.epoch_loss_sum);
  put(&out, s.epoch_targets);
  put_floats(&out, s.params);
  put_floats(&out, s.adam_m);
  put_floats(&out, s.adam_v);
  return out;
}

Result<TrainState> decode_train_state(std::string_view bytes) {
  if (!bytes.starts_with(kMagic)) return Status::corrupt("not a keel training state");
  Reader r(bytes.substr(kMagic.size()));
  uint32_t version = 0;
  if (!r.get(&version) || version != kVersion) {
    return Status::corrupt("training state version " + std::to_string(version) +
                           " is not the one this keel reads (" + std::to_string(kVersion) + ")");
  }
  TrainState s;
  const bool ok = r.get(&s.seed) && r.get(&s.epochs) && r.get(&s.batch_size) &&
                  r.get(&s.num_examples) && r.get(&s.step) && r.get(&s.epoch) &&
                  r.get(&s.next_example) && r.get(&s.trained_tokens) && r.get(&s.epoch_loss_sum) &&
                  r.get(&s.epoch_targets) && r.get_floats(&s.params) && r.get_floats(&s.adam_m) &&
                  r.get_floats(&s.adam_v);
  if (!ok || !r.done()) return Status::corrupt("the training state is cut short or too long");
  if (s.adam_m.size() != s.params.size() || s.adam_v.size() != s.params.size() || s.step < 0 ||
      s.epoch < 0 || s.next_example < 0 || s.next_example > s.num_examples) {
    return Status::corrupt("the training state's sizes or cursor disagree");
  }
  return s;
}

}  // namespace keel::train

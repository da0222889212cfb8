// Weights stream codec (see weights_stream.h).
#include "cluster/weights/weights_stream.h"

#include <span>

#include "cluster/protocol/messages.h"

namespace keel::cluster {

kv::BlockHash weights_stream_identity(std::string_view entry) {
  auto hash = [entry](std::string_view prefix) {
    std::string s(prefix);
    s += entry;
    return frame_payload_checksum(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(s.data()), s.size()));
  };
  return {hash("keel-weights-lo:"), hash("keel-weights-hi:")};
}

WeightsChunk weights_chunk_of(const WeightsFrameHeader& header) {
  return {header.offset, header.entry_bytes, header.entry_hash, header.stream_id};
}

Status check_weights_chunk(const WeightsChunk& c, uint64_t payload_bytes) {
  if (c.offset > c.total_bytes || payload_bytes > c.total_bytes - c.offset) {
    return Status::invalid_argument(
        "weights chunk at " + std::to_string(c.offset) + " of " + std::to_string(payload_bytes) +
        " bytes lies outside its stream of " + std::to_string(c.total_bytes) + " bytes");
  }
  return Status::ok_status();
}

net::Message encode(const WeightsFetchRequest& m) {
  return {std::string(kWeightsFetch), Json{{"entry", m.entry},
                                           {"reply_to", m.reply_to},
                                           {"stream_id", m.stream_id},
                                           {"chunk_bytes", m.chunk_bytes},
                                           {"probe_bytes", m.probe_bytes}}};
}

Result<WeightsFetchRequest> decode_weights_fetch(const Json& body) {
  try {
    WeightsFetchRequest m;
    m.entry = body.at("entry").get<std::string>();
    m.reply_to = body.at("reply_to").get<std::string>();
    m.stream_id = body.at("stream_id").get<uint64_t>();
    m.chunk_bytes = body.at("chunk_bytes").get<uint64_t>();
    m.probe_bytes = body.value("probe_bytes", uint64_t{0});
    if (m.chunk_bytes == 0 || m.chunk_bytes > kMaxWeightsChunkBytes) {
      return Status::invalid_argument("weights_fetch: chunk_bytes " +
                                      std::to_string(m.chunk_bytes) + " out of (0, 64 MiB]");
    }
    if (m.entry.empty() && m.probe_bytes == 0) {
      return Status::invalid_argument("weights_fetch: names neither an entry nor a probe size");
    }
    if (m.reply_to.empty()) return Status::invalid_argument("weights_fetch: no reply_to");
    return m;
  } catch (const Json::exception& e) {
    return Status::invalid_argument(std::string("weights_fetch: ") + e.what());
  }
}

Json encode_weights_reply(const WeightsFetchReply& r) {
  Json body = status_body(r.status);
  body["bytes"] = r.bytes;
  body["entry_hash"] = r.entry_hash;
  return body;
}

Result<WeightsFetchReply> decode_weights_reply(const Json& body) {
  try {
    WeightsFetchReply r;
    r.status = decode_status_body(body);
    r.bytes = body.value("bytes", uint64_t{0});
    r.entry_hash = body.value("entry_hash", uint64_t{0});
    return r;
  } catch (const Json::exception& e) {
    return Status::invalid_argument(std::string("weights reply: ") + e.what());
  }
}

}  // namespace keel::cluster

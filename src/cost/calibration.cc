// Calibration JSON: {"format": "infinipipe-calibration", "version": 2, "metadata": {...},
// "model": {...}, "device": {...}, "coefficients": {...}}, and optionally "ranks" from `train`
// (calibration_ranks.h) and "host_links" from `profile` across hosts (calibration_host_links.h).
// Every field is required on load so a file from another tool or version fails loudly instead of
// planning with zeros; the collective table's rows may come from older files' link fields
// (calibration_collectives.h). Version 1 differs only in one key's name (see coeff_key) and still
// loads.
#include "cost/calibration.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "core/output_file.h"
#include "cost/calibration_collectives.h"
#include "cost/calibration_host_links.h"
#include "cost/calibration_ranks.h"

namespace infinipipe::cost {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kFormat = "infinipipe-calibration";

// Coefficient fields in one table so writing and reading cannot drift apart.
struct DoubleField {
  const char* key;
  double Coefficients::*ptr;
};
constexpr DoubleField kCoeffFields[] = {
    {"alpha1", &Coefficients::alpha1},
    {"alpha2", &Coefficients::alpha2},
    {"beta1", &Coefficients::beta1},
    {"embedding_per_token", &Coefficients::embedding_per_token},
    {"lm_head_per_token", &Coefficients::lm_head_per_token},
    {"backward_factor", &Coefficients::backward_factor},
    {"recompute_factor", &Coefficients::recompute_factor},
    {"half_efficiency_tokens", &Coefficients::half_efficiency_tokens},
    {"act_bytes_per_token_layer", &Coefficients::act_bytes_per_token_layer},
    {"recompute_bytes_per_token_layer", &Coefficients::recompute_bytes_per_token_layer},
    {"kv_bytes_per_token_layer", &Coefficients::kv_bytes_per_token_layer},
    {"dkv_bytes_per_token_layer", &Coefficients::dkv_bytes_per_token_layer},
    {"grad_bytes_per_token", &Coefficients::grad_bytes_per_token},
    {"fwd_transient_bytes_per_token", &Coefficients::fwd_transient_bytes_per_token},
    {"embedding_bytes_per_token", &Coefficients::embedding_bytes_per_token},
    {"lm_head_bytes_per_token", &Coefficients::lm_head_bytes_per_token},
    {"bytes_per_param", &Coefficients::bytes_per_param},
    {"optimizer_bytes_per_param", &Coefficients::optimizer_bytes_per_param},
    {"p2p_bytes_per_token", &Coefficients::p2p_bytes_per_token},
};
// Engine-specific memory terms added after the first files were written: optional on load
// (absent = the preset's value), always written.
constexpr DoubleField kOptionalCoeffFields[] = {
    {"index_bytes_per_token", &Coefficients::index_bytes_per_token},
    {"attn_workspace_bytes", &Coefficients::attn_workspace_bytes},
    {"attn_workspace_bytes_per_longest_token",
     &Coefficients::attn_workspace_bytes_per_longest_token},
    {"backward_logits_blocks", &Coefficients::backward_logits_blocks},
    {"lm_head_grad_reuse_bytes_per_token", &Coefficients::lm_head_grad_reuse_bytes_per_token},
    {"lm_head_backward_factor", &Coefficients::lm_head_backward_factor},
};

// Version 1 called the bytes a recomputed layer keeps "ckpt_bytes_per_token_layer".
constexpr int kCalibrationVersionOldRecomputeKey = 1;
const char* coeff_key(const DoubleField& f, int version) {
  if (version == kCalibrationVersionOldRecomputeKey &&
      f.ptr == &Coefficients::recompute_bytes_per_token_layer)
    return "ckpt_bytes_per_token_layer";
  return f.key;
}

// Quantities that must be strictly positive for the formulas to make sense (they divide); the
// link fields are those of files from before the collective table (calibration_collectives.h).
bool must_be_positive(const std::string& key) {
  return key == "p2p_bandwidth_intra" || key == "p2p_bandwidth_inter" ||
         key == "alltoall_bandwidth" || key == "backward_factor";
}

// The largest value a coefficient may take, in its own unit: far beyond any real device, and
// small enough that the recompute solver's objective stays within what Clp accepts.
double coefficient_max(const std::string& key) {
  if (key.find("bandwidth") != std::string::npos) return 1e15;  // bytes/s: a PB/s
  if (key.find("factor") != std::string::npos || key == "backward_logits_blocks") return 1e3;
  if (key.find("bytes") != std::string::npos || key.find("tokens") != std::string::npos)
    return 1e12;
  return 60.0;  // seconds per token, token pair, chunk or message
}

template <typename T>
T get(const nlohmann::json& j, const char* key, const std::string& where, const char* section) {
  if (!j.contains(key))
    fail("calibration {}: missing field '{}.{}'; write it again with `infinipipe profile`", where,
         section, key);
  const std::string field = fmt::format("calibration {}: field '{}.{}'", where, section, key);
  const nlohmann::json& v = j.at(key);
  const bool right_type = std::is_same_v<T, bool>          ? v.is_boolean()
                          : std::is_same_v<T, std::string> ? v.is_string()
                          : std::is_integral_v<T>          ? v.is_number_integer()
                                                           : v.is_number();
  if (!right_type) fail("{} has the wrong type ({}: {})", field, v.type_name(), json_brief(v));
  if constexpr (std::is_same_v<T, bool>) {
    return json_bool(v, field);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return json_string(v, field);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(
        json_int(v, field, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  } else {
    return json_number(v, field);
  }
}

const nlohmann::json& section(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_object())
    fail("calibration {}: missing object '{}'; write it again with `infinipipe profile`", where,
         key);
  return j.at(key);
}

void metadata_read(const json& j, const std::string& where, Calibration& c) {
  const json& meta = section(j, "metadata", where);
  c.machine = get<std::string>(meta, "machine", where, "metadata");
  c.date = get<std::string>(meta, "date", where, "metadata");
  c.notes = get<std::string>(meta, "notes", where, "metadata");
  c.ulysses_degree = get<int64_t>(meta, "ulysses_degree", where, "metadata");
  c.bf16 = get<bool>(meta, "bf16", where, "metadata");
  c.fit_residual_forward = get<double>(meta, "fit_residual_forward", where, "metadata");
  c.fit_residual_backward = get<double>(meta, "fit_residual_backward", where, "metadata");
  if (c.ulysses_degree < 1)
    fail("calibration {}: metadata.ulysses_degree must be >= 1, got {}", where, c.ulysses_degree);
}

void model_read(const json& j, const std::string& where, Calibration& c) {
  const json& model = section(j, "model", where);
  ModelConfig& m = c.model;
  m.num_layers = get<int64_t>(model, "num_layers", where, "model");
  m.hidden_size = get<int64_t>(model, "hidden_size", where, "model");
  m.num_attention_heads = get<int64_t>(model, "num_attention_heads", where, "model");
  m.num_query_groups = get<int64_t>(model, "num_query_groups", where, "model");
  m.ffn_hidden_size = get<int64_t>(model, "ffn_hidden_size", where, "model");
  m.vocab_size = get<int64_t>(model, "vocab_size", where, "model");
  m.seq_length = get<int64_t>(model, "seq_length", where, "model");
  m.tie_embeddings = get<bool>(model, "tie_embeddings", where, "model");
  // The attention block's shape; files written before the model families have a Llama's.
  if (model.contains("kv_channels")) m.kv_channels = get<int64_t>(model, "kv_channels", where, "model");
  if (model.contains("add_qkv_bias"))
    m.add_qkv_bias = get<bool>(model, "add_qkv_bias", where, "model");
  if (model.contains("qk_layernorm"))
    m.qk_layernorm = get<bool>(model, "qk_layernorm", where, "model");
  if (model.contains("family")) m.family = get<std::string>(model, "family", where, "model");
  m.resolve_family();
  try {
    m.validate();
  } catch (const Error& e) {
    fail("calibration {}: its model is invalid: {}", where, e.what());
  }
}

void device_read(const json& j, const std::string& where, Calibration& c) {
  const json& dev = section(j, "device", where);
  DeviceSpec& d = c.device;
  // Device figures only scale times; a negative or beyond-exascale one is damage.
  const auto device_number = [&](const char* key) {
    const double v = get<double>(dev, key, where, "device");
    if (v < 0 || v > 1e18)
      fail("calibration {}: device.{} = {} must be between 0 and 1e18", where, key, v);
    return v;
  };
  d.name = get<std::string>(dev, "name", where, "device");
  d.peak_flops = device_number("peak_flops");
  d.memory_bytes = get<int64_t>(dev, "memory_bytes", where, "device");
  d.memory_bandwidth = device_number("memory_bandwidth");
  d.intra_node_bandwidth = device_number("intra_node_bandwidth");
  d.inter_node_bandwidth = device_number("inter_node_bandwidth");
  d.latency_s = device_number("latency_s");
  d.matmul_efficiency = device_number("matmul_efficiency");
  d.attention_efficiency = device_number("attention_efficiency");
  d.half_efficiency_tokens = device_number("half_efficiency_tokens");
  d.chunk_overhead_s = device_number("chunk_overhead_s");
  d.backward_factor = device_number("backward_factor");
  d.sources = get<std::string>(dev, "sources", where, "device");
  if (dev.contains("sgemm_flops")) {  // files from before the profiler measured it lack it
    d.sgemm_flops = get<double>(dev, "sgemm_flops", where, "device");
    if (!std::isfinite(d.sgemm_flops) || d.sgemm_flops < 0)
      fail("calibration {}: device.sgemm_flops = {} must be >= 0 and finite", where, d.sgemm_flops);
  }
  if (dev.contains("reserved_memory_bytes")) {  // files from before it existed: none reserved
    d.reserved_memory_bytes = get<int64_t>(dev, "reserved_memory_bytes", where, "device");
    if (d.reserved_memory_bytes < 0 || d.reserved_memory_bytes >= d.memory_bytes)
      fail("calibration {}: device.reserved_memory_bytes = {} must be in [0, memory_bytes)", where,
           d.reserved_memory_bytes);
  }
  if (d.memory_bytes <= 0)
    fail("calibration {}: device.memory_bytes must be > 0, got {}", where, d.memory_bytes);
}

// file_version: the version the file was written in (its keys' names).
void coefficients_read(const json& j, const std::string& where, int file_version, Calibration& c) {
  const json& co = section(j, "coefficients", where);
  for (const DoubleField& f : kCoeffFields) {
    double v = get<double>(co, coeff_key(f, file_version), where, "coefficients");
    if (!std::isfinite(v) || v < 0 || (v == 0 && must_be_positive(f.key)) ||
        v > coefficient_max(f.key))
      fail("calibration {}: coefficients.{} = {} must be {} and at most {:g}", where, f.key, v,
           must_be_positive(f.key) ? "> 0" : ">= 0", coefficient_max(f.key));
    c.coeffs.*f.ptr = v;
  }
  // Files from before the LM head had its own backward factor charged it the layers' one.
  c.coeffs.lm_head_backward_factor = c.coeffs.backward_factor;
  for (const DoubleField& f : kOptionalCoeffFields) {
    if (!co.contains(f.key)) continue;
    double v = get<double>(co, f.key, where, "coefficients");
    if (!std::isfinite(v) || v < 0 || v > coefficient_max(f.key))
      fail("calibration {}: coefficients.{} = {} must be >= 0 and at most {:g}", where, f.key, v,
           coefficient_max(f.key));
    c.coeffs.*f.ptr = v;
  }
  calibration_collectives_read(co, where, c.coeffs.collectives);
  c.coeffs.logits_block_tokens = get<int64_t>(co, "logits_block_tokens", where, "coefficients");
  if (c.coeffs.logits_block_tokens <= 0)
    fail("calibration {}: coefficients.logits_block_tokens must be > 0", where);
}

}  // namespace

double calibration_coefficient_max(const std::string& key) {
  return coefficient_max(key);
}

bool calibration_coefficient_positive(const std::string& key) {
  return must_be_positive(key);
}

std::string calibration_to_json(const Calibration& cal) {
  const ModelConfig& m = cal.model;
  const DeviceSpec& d = cal.device;
  json coeffs = json::object();
  for (const DoubleField& f : kCoeffFields) coeffs[f.key] = cal.coeffs.*f.ptr;
  for (const DoubleField& f : kOptionalCoeffFields) coeffs[f.key] = cal.coeffs.*f.ptr;
  coeffs["logits_block_tokens"] = cal.coeffs.logits_block_tokens;
  coeffs["collectives"] = calibration_collectives_to_json(cal.coeffs.collectives);
  json j = {
      {"format", kFormat},
      {"version", cal.version},
      {"metadata",
       {{"machine", cal.machine},
        {"date", cal.date},
        {"notes", cal.notes},
        {"ulysses_degree", cal.ulysses_degree},
        {"bf16", cal.bf16},
        {"fit_residual_forward", cal.fit_residual_forward},
        {"fit_residual_backward", cal.fit_residual_backward}}},
      {"model",
       {{"num_layers", m.num_layers},
        {"hidden_size", m.hidden_size},
        {"num_attention_heads", m.num_attention_heads},
        {"num_query_groups", m.num_query_groups},
        {"ffn_hidden_size", m.ffn_size()},
        {"vocab_size", m.vocab_size},
        {"seq_length", m.seq_length},
        {"tie_embeddings", m.tie_embeddings},
        {"family", m.family},
        {"kv_channels", m.kv_channels},
        {"add_qkv_bias", m.add_qkv_bias},
        {"qk_layernorm", m.qk_layernorm}}},
      {"device",
       {{"name", d.name},
        {"peak_flops", d.peak_flops},
        {"memory_bytes", d.memory_bytes},
        {"reserved_memory_bytes", d.reserved_memory_bytes},
        {"memory_bandwidth", d.memory_bandwidth},
        {"intra_node_bandwidth", d.intra_node_bandwidth},
        {"inter_node_bandwidth", d.inter_node_bandwidth},
        {"latency_s", d.latency_s},
        {"matmul_efficiency", d.matmul_efficiency},
        {"attention_efficiency", d.attention_efficiency},
        {"half_efficiency_tokens", d.half_efficiency_tokens},
        {"chunk_overhead_s", d.chunk_overhead_s},
        {"backward_factor", d.backward_factor},
        {"sgemm_flops", d.sgemm_flops},
        {"sources", d.sources}}},
      {"coefficients", coeffs},
  };
  if (!cal.ranks.empty()) j["ranks"] = calibration_ranks_to_json(cal);
  if (!cal.host_links.empty()) j["host_links"] = calibration_host_links_to_json(cal.host_links);
  return j.dump(2) + "\n";
}

Calibration calibration_from_json(const std::string& text, const std::string& where) {
  const nlohmann::json j =
      json_parse(text, "calibration " + where, "write it again with `infinipipe profile`");
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormat)
    fail("calibration {}: not an infinipipe calibration file (expected \"format\": \"{}\")", where,
         kFormat);
  Calibration c;
  c.version = get<int>(j, "version", where, "");
  const int file_version = c.version;
  if (c.version != kCalibrationVersion && c.version != kCalibrationVersionOldRecomputeKey)
    fail(
        "calibration {} has version {}, this build reads versions {} and {}: run `infinipipe "
        "profile` again",
        where, c.version, kCalibrationVersionOldRecomputeKey, kCalibrationVersion);
  c.version = kCalibrationVersion;  // saved again, it is written in the current form
  metadata_read(j, where, c);
  model_read(j, where, c);
  device_read(j, where, c);
  coefficients_read(j, where, file_version, c);
  calibration_ranks_read(j, where, c);
  calibration_host_links_read(j, where, c);
  return c;
}

Calibration load_calibration(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    fail(
        "cannot open calibration file '{}': check the path, or write one with `infinipipe "
        "profile`",
        path);
  const std::string text = input_file_read(path, input_kind::kCalibration);
  return calibration_from_json(text, "'" + path + "'");
}

void save_calibration(const Calibration& cal, const std::string& path) {
  output_file_write(path, calibration_to_json(cal), "the calibration file");
}

}  // namespace infinipipe::cost

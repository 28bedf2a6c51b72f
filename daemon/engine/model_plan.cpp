#include "engine/model_plan.h"

#include <algorithm>

#include "common/error.h"

namespace qwen3::engine {

static_assert(static_cast<uint32_t>(Precision::q24) == QN_PREC_Q24 &&
              static_cast<uint32_t>(Precision::q8) == QN_PREC_Q8 && static_cast<uint32_t>(Precision::q4) == QN_PREC_Q4 &&
              static_cast<uint32_t>(Precision::q8a8) == QN_PREC_Q8A8);

Precision matrix_precision(Precision model, MatrixKind kind) {
  uint32_t op = 0;  // the embedding: no matmul op
  switch (kind) {
    case MatrixKind::qkv: op = QN_OP_QKV; break;
    case MatrixKind::o: op = QN_OP_O; break;
    case MatrixKind::gate_up: op = QN_OP_GATEUP; break;
    case MatrixKind::down: op = QN_OP_DOWN; break;
    case MatrixKind::lm_head: op = QN_OP_VOCAB; break;
    case MatrixKind::embed: break;
  }
  return static_cast<Precision>(qn_op_format(static_cast<uint32_t>(model), op));
}

uint32_t pad_to_group(uint32_t n) { return qn_groups_for(n) * QN_GROUP; }

uint32_t row_bytes_for(uint32_t cols, Precision p) {
  return qn_row_bytes(static_cast<uint32_t>(p), qn_groups_for(cols));
}

uint32_t unit_bytes_for(uint32_t cols, Precision p) {
  return qn_unit_bytes(static_cast<uint32_t>(p), qn_groups_for(cols));
}

RowRange worker_rows(uint32_t rows, bool pairs, Precision p, uint32_t t, uint32_t T) {
  const uint32_t block = qn_unit_rows(static_cast<uint32_t>(p));
  const uint32_t unit = block == 1 ? 1 : pairs ? block / 2 : block;
  const uint64_t steps = (uint64_t(rows) + unit - 1) / unit;
  RowRange r;
  r.begin = static_cast<uint32_t>(std::min<uint64_t>(steps * t / T * unit, rows));
  r.end = static_cast<uint32_t>(std::min<uint64_t>(steps * (t + 1) / T * unit, rows));
  return r;
}

uint32_t engine_max_context(const ModelConfig& c, int requested) {
  constexpr int kDefault = 40960;
  if (requested > 0) return static_cast<uint32_t>(std::min(requested, kDefault * 4));
  const int from_config = c.max_position_embeddings > 0 ? c.max_position_embeddings : 4096;
  return static_cast<uint32_t>(std::min(from_config, kDefault));
}

uint64_t MatrixPlan::unit_offset(uint32_t u) const {
  if (m.rows_per_entry == 0) return offset + uint64_t(u) * m.row_bytes;
  uint32_t slot = u + m.row_skip;
  return uint64_t(m.entry0 + slot / m.rows_per_entry) * QN_WENTRY_BYTES +
         uint64_t(slot % m.rows_per_entry) * m.row_bytes;
}

const MatrixPlan& ModelPlan::layer_matrix(int layer, MatrixKind kind) const {
  return matrices[size_t(layer) * 4 + static_cast<size_t>(kind)];
}
const MatrixPlan& ModelPlan::embed() const { return tied ? matrices.back() : matrices[matrices.size() - 2]; }
const MatrixPlan& ModelPlan::lm_head() const { return tied ? embed() : matrices.back(); }

namespace {

// What the BPF engine cannot run, refused before any planning.
void check_plannable(const ModelConfig& c, uint32_t threads, uint32_t kv_bits) {
  if (kv_bits != 8 && kv_bits != 16) throw invalid_argument("kv_bits must be 8 or 16");
  if (c.hidden_size <= 0 || c.num_hidden_layers <= 0 || c.num_attention_heads <= 0 ||
      c.num_key_value_heads <= 0 || c.head_dim <= 0 || c.intermediate_size <= 0 || c.vocab_size <= 0)
    throw invalid_argument("model config has a non-positive dimension");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    throw invalid_argument("num_attention_heads is not a multiple of num_key_value_heads");
  if (c.head_dim % 8 != 0 || c.head_dim > 256)
    throw invalid_argument("head_dim must be a multiple of 8 and at most 256 for the BPF engine");
  if (threads == 0 || threads > QN_THREADS_LIMIT)
    throw invalid_argument("engine threads must be between 1 and " + std::to_string(QN_THREADS_LIMIT));
  if (!(c.rope_theta >= 2.0 && c.rope_theta < 1e12))
    throw invalid_argument("rope_theta " + std::to_string(c.rope_theta) +
                           " is outside what the BPF RoPE table handles (2 .. 1e12)");
}

// Norm weights: per layer input, post-attention, q, k; then the final norm.
void plan_norms(const ModelConfig& c, ModelPlan& plan) {
  const ProgramLayout& l = plan.layout;
  const uint32_t hd = c.head_dim;
  uint32_t off = 0;
  for (int i = 0; i < c.num_hidden_layers; i++) {
    NormOffsets n;
    n.input = off;
    off += l.hid_pad;
    n.post = off;
    off += l.hid_pad;
    n.q = off;
    off += hd;
    n.k = off;
    off += hd;
    plan.norms.push_back(n);
  }
  plan.final_norm = off;
  off += l.hid_pad;
  plan.layout.shape.norms_len = (off + 7) & ~7u;
}

}  // namespace

ModelPlan make_model_plan(const ModelConfig& c, Precision precision, bool arena, uint32_t threads,
                          uint32_t max_ctx, uint32_t kv_bits) {
  const bool q24 = precision == Precision::q24;
  check_plannable(c, threads, kv_bits);
  const uint32_t hd = c.head_dim;
  ModelPlan plan;
  plan.tied = c.tie_word_embeddings;
  ProgramLayout& l = plan.layout;
  qn_shape& s = l.shape;
  s.hidden = c.hidden_size;
  s.n_layers = c.num_hidden_layers;
  s.n_heads = c.num_attention_heads;
  s.n_kv_heads = c.num_key_value_heads;
  s.head_dim = hd;
  s.inter = c.intermediate_size;
  s.vocab = c.vocab_size;
  s.q_dim = c.q_dim();
  s.kv_dim = c.kv_dim();
  s.qkv_dim = s.q_dim + 2 * s.kv_dim;
  s.precision = static_cast<uint32_t>(precision);
  s.tied = c.tie_word_embeddings ? 1 : 0;
  s.threads = threads;
  s.rope_theta_q16 = static_cast<uint64_t>(c.rope_theta * 65536.0 + 0.5);
  s.eps_q32 = static_cast<uint64_t>(c.rms_norm_eps * 4294967296.0 + 0.5);
  s.max_ctx = (std::max<uint32_t>(max_ctx, 2) + 1) & ~1u;  // even: keeps the scratch 8-aligned
  s.kv_bytes = kv_bits / 8;
  // int16: K, V, then an int32 max per vector; int8: K, V only (the rotated
  // layout keeps each vector's scale code inside its codes; docs/kv-cache.md)
  s.kv_rec_bytes = qn_kv_rec_bytes(hd, s.kv_bytes);
  s.kv_entry_bytes = qn_kv_entry_bytes(hd, s.kv_bytes);
  l.hid_pad = pad_to_group(s.hidden);
  l.qkv_pad = pad_to_group(s.qkv_dim);
  l.qd_pad = pad_to_group(s.q_dim);
  l.inter_pad = pad_to_group(s.inter);
  l.in_pad = std::max({l.hid_pad, l.qd_pad, l.inter_pad});
  l.rope_positions = s.max_ctx;
  l.arena = arena;
  s.max_groups = l.in_pad / QN_GROUP;
  // the largest unit (layout.h) of any matrix: q24 a row, q8 a block of 8
  // rows, q4 a block of 16 (a q4 model also has q8 matrices); the kernels
  // bound their reads by it
  for (Precision p : {precision, matrix_precision(precision, MatrixKind::down),
                      matrix_precision(precision, MatrixKind::lm_head)})
    s.max_row_bytes = std::max({s.max_row_bytes, unit_bytes_for(s.hidden, p), unit_bytes_for(s.q_dim, p),
                                unit_bytes_for(s.inter, p)});
  if (s.max_row_bytes * 2 > QN_WENTRY_BYTES) throw invalid_argument("model rows too wide for the BPF engine");

  plan_norms(c, plan);

  // Weight matrices, in the order the forward pass reads them.
  uint64_t cursor = 0;  // map path: entry index * WENTRY; arena path: bytes
  auto add = [&](MatrixKind kind, int layer, uint32_t rows, uint32_t cols) {
    MatrixPlan p;
    p.kind = kind;
    p.layer = layer;
    p.rows = rows;
    p.cols = cols;
    p.m.rows = rows;
    p.m.groups = qn_groups_for(cols);
    // tied: the one matrix is the vocabulary's too, and has its format
    p.precision = matrix_precision(precision, kind == MatrixKind::embed && plan.tied ? MatrixKind::lm_head : kind);
    p.m.format = static_cast<uint32_t>(p.precision);
    p.m.row_bytes = unit_bytes_for(cols, p.precision);
    const uint32_t units = p.units();
    p.m.act_bits = QN_ACT_BITS_MAX;
    p.m.wfrac = p.precision == Precision::q24 ? QN_W24_FRAC : QN_W8_FRAC;  // lowered by the conversion for large weights
    if (arena) {
      p.offset = cursor;
      p.m.arena_off = cursor;  // the engine adds the arena's address after load
      cursor += (uint64_t(units) * p.m.row_bytes + 63) & ~uint64_t(63);
    } else {
      // Packed after the previous matrix, starting at a whole unit slot of
      // this matrix inside the current entry; units never straddle entries.
      uint32_t rpe = (QN_WENTRY_BYTES - s.max_row_bytes) / p.m.row_bytes + 1;
      uint64_t entry = cursor / QN_WENTRY_BYTES;
      uint64_t in_entry = cursor % QN_WENTRY_BYTES;
      uint64_t skip = (in_entry + p.m.row_bytes - 1) / p.m.row_bytes;
      if (skip >= rpe) {
        entry++;
        skip = 0;
      }
      p.m.rows_per_entry = rpe;
      p.m.entry0 = static_cast<uint32_t>(entry);
      p.m.row_skip = static_cast<uint32_t>(skip);
      p.offset = p.unit_offset(0);
      uint64_t last = skip + units - 1;
      cursor = (entry + last / rpe) * QN_WENTRY_BYTES + (last % rpe + 1) * uint64_t(p.m.row_bytes);
    }
    plan.matrices.push_back(p);
  };
  for (int i = 0; i < c.num_hidden_layers; i++) {
    add(MatrixKind::qkv, i, s.qkv_dim, s.hidden);
    add(MatrixKind::o, i, s.hidden, s.q_dim);
    add(MatrixKind::gate_up, i, 2 * s.inter, s.hidden);
    add(MatrixKind::down, i, s.hidden, s.inter);
  }
  add(MatrixKind::embed, -1, s.vocab, s.hidden);
  if (!plan.tied) add(MatrixKind::lm_head, -1, s.vocab, s.hidden);
  if (arena) {
    if (cursor > (uint64_t(1) << 32) - (uint64_t(1) << 20))
      throw resource_exhausted("converted weights (" + std::to_string(cursor >> 20) +
                               " MiB) exceed the 4 GiB BPF arena (its pages are addressed by 32-bit offsets); use "
                               "weight_path = map" + (q24 ? " or precision = q8" : ""));
    l.weight_bytes = cursor;
    l.weight_entries = 1;
  } else {
    l.weight_entries = static_cast<uint32_t>((cursor + QN_WENTRY_BYTES - 1) / QN_WENTRY_BYTES);
    l.weight_bytes = uint64_t(l.weight_entries) * QN_WENTRY_BYTES;
  }
  plan.weight_bytes = cursor;
  return plan;
}

}  // namespace qwen3::engine

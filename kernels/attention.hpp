#pragma once
// Attention forward with log-sum-exp over a work list (plain C++ interface; the CUDA lives in .cu files).
//
// One launch runs many items. An item is a run of query rows (contiguous in the Q buffer and in global
// position) against a list of KV pieces, each piece its own buffer. Received pieces are never
// concatenated; the same list serves one rank's step in a plan, grouped queries over shared KV, and
// packed variable-length batches. Masks use global positions: with `causal`, query at position p sees
// keys at positions <= p, so zigzag halves and diagonal blocks are exact.
//
// Layouts (row-major, "BSHD"): Q [B, q_rows, H, D]; a piece's K and V [B, len, Hkv, D] (or a token range
// of a larger buffer, with batch_stride); out fp32
// [B, q_rows, H, D]; lse fp32 [B, H, q_rows], natural log. GQA/MQA: query head h reads KV head
// h / (H / Hkv).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tasp::kernels {

enum class DType { BF16, FP16 };

struct KvPiece {
  const void* k = nullptr;
  const void* v = nullptr;
  int len = 0;          // tokens
  long long pos0 = 0;   // global position of token 0
  long long batch_stride = 0;  // elements between batches; 0: len * Hkv * D (the piece is its own buffer)
};

struct WorkItem {
  int q_row0 = 0, q_len = 0;  // rows [q_row0, q_row0 + q_len) of Q / out / lse
  long long q_pos0 = 0;       // global position of row q_row0
  int piece_begin = 0, piece_count = 0;  // into AttentionBatch::pieces
  bool causal = false;
  bool accumulate = false;  // fold into the running out/lse (in place) instead of overwriting them
  // Beyond causal (planner/mask.hpp): the rows' document, keys at positions [k_begin, k_end) (so an item's rows
  // lie in one document), and a sliding window: a row at p sees keys in [p - window_left, p + window_right]
  // (-1: unbounded). Tiles no row of a CTA sees are skipped whole.
  long long k_begin = 0, k_end = 0x7fffffffffffffffLL;
  int window_left = -1, window_right = -1;
};

struct AttentionBatch {
  DType dtype = DType::BF16;
  int B = 1, H = 1, Hkv = 1, D = 128;
  float scale = 0;  // 0: 1/sqrt(D)
  const void* q = nullptr;
  int q_rows = 0;
  float* out = nullptr;
  float* lse = nullptr;
  std::vector<WorkItem> items;
  std::vector<KvPiece> pieces;
};

namespace bwd {
struct PlanCache;
}
struct StagingRing;
// Device memory for the work list; reused across launches, grown when needed. The backward also keeps its
// plans here between launches (bwd_plan_cache.hpp). Its end waits for the launches queued with it on its device.
struct Workspace {
  void* device = nullptr;
  size_t bytes = 0;
  int device_id = -1;  // the device of `device` (and of the plans' visits), where its launches run
  std::vector<unsigned char> host;
  std::unique_ptr<bwd::PlanCache> bwd_plans;
  std::unique_ptr<StagingRing> staging;  // pinned buffers the uploads go through (staging.hpp)
  void* tail = nullptr;                   // the backward's split CTAs' counts and sums (bwd::Params::tail_done), zero
  size_t tail_bytes = 0;
  Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace();
};
// The device memory a workspace holds: its work list, the backward's cached plans and its last wave's scratch.
size_t workspace_device_bytes(const Workspace& ws);

// Head dims with kernels: forward 64, 80, 96, 128, 256; backward the same (head_dims.hpp). head_dims_text lists them.
bool head_dim_supported(int D, bool backward);
std::string head_dims_text(bool backward);
// Empty when both asked passes have kernels for D, else what is missing ("D=192 has no backward kernel (64, 80, 96, 128, 256)").
std::string unsupported_head_dim(int D, bool fwd, bool bwd);
// Throws std::invalid_argument naming items[i] when its rows lie outside [0, q_rows), its pieces outside the
// batch's `pieces`, or its document or window makes no sense (both passes check their items so).
void check_item(const WorkItem& it, size_t i, int q_rows, size_t pieces);
// Checks the batch (throws std::invalid_argument naming the field), uploads the work list and launches
// on `stream` (a cudaStream_t). Items may not overlap in rows unless they accumulate in launch order
// across launches; within one launch every row belongs to at most one item.
void attention_forward(const AttentionBatch& b, Workspace& ws, void* stream);

// ---- Backward (FlashAttention's formulation over the same work lists) ----
//
// For every item and every piece it lists, adds the block's contribution to dQ of the item's rows and to
// the piece's dK/dV accumulator, using the forward's final LSE and the row sums D = rowsum(dO * O) that
// attention_backward_prepare computes. Masks as in the forward. GQA/MQA: dK/dV of a KV head sum over its
// query heads (inside one CTA, so the sum's order is fixed, unless a GQA group is split over CTAs). dQ is summed
// over key tiles with float atomics, so its last bits depend on the order the tiles finish in, unless
// `deterministic`; so are the dK/dV of the last wave's CTAs that run split in parts (bwd_tail.hpp), never under
// `deterministic`.
//
// Layouts: dout as q [B, q_rows, H, D]; dsum and lse fp32 [B, H, q_rows]; a piece's accumulator fp32
// [B, len, Hkv, D] (added into; batch_stride as KvPiece's). dQ goes into `dq_accum`, a scratch the caller
// zeroes once and may keep across launches with the same items (the steps of a pass): tiles of 80 rows of each
// item at D = 80..128, 128 at D = 64, per (batch, head, warpgroup), in the order the kernel's threads hold them,
// so each CTA adds its part of a tile with one bulk reduce. attention_backward_finish adds it, scaled, into
// dq [B, q_rows, H, D].
// Whether a backward launch of these heads may write its dK/dV in 16 bits (GradPiece::dk16): one CTA writes each
// key row, as under MHA or with the deterministic grid's CTA per group (a split GQA group's CTAs add instead).
inline bool grads16_allowed(int H, int Hkv, bool deterministic) { return H == Hkv || deterministic; }

struct GradPiece {
  float* dk = nullptr;
  float* dv = nullptr;
  long long batch_stride = 0;  // elements between batches; 0: len * Hkv * D
  // Instead of dk/dv: the launch's sums written (not added) in the batch's 16-bit type (16-byte aligned, batch_stride
  // a multiple of 8), where one launch makes a piece's whole gradient (one GPU, Ulysses' heads) and every key row has
  // one writing CTA (H == Hkv, or the deterministic grid's CTA per group). No fp32 accumulator to clear, add into and
  // cast: B=4 H=32 S=4096 D=128 moves 1.07 GB by fp32 reductions where 16-bit stores move 0.27 GB.
  void* dk16 = nullptr;
  void* dv16 = nullptr;
};

struct AttentionBackwardBatch {
  DType dtype = DType::BF16;
  int B = 1, H = 1, Hkv = 1, D = 128;
  float scale = 0;  // 0: 1/sqrt(D)
  // q, dout, lse, dsum and dq_accum 16-byte aligned (TMA reads the first four).
  const void* q = nullptr;
  const void* dout = nullptr;
  int q_rows = 0;
  const float* lse = nullptr;  // [B][H][q_rows]
  const float* dsum = nullptr;  // the same layout (attention_backward_prepare)
  float* dq_accum = nullptr;  // dq_accum_floats(*this) floats
  std::vector<WorkItem> items;  // `accumulate` is ignored: the backward always adds
  std::vector<KvPiece> pieces;
  std::vector<GradPiece> grads;  // one per piece
  // dQ bit-identical from run to run: the CTAs that add into one dQ tile take turns in launch order (a counter
  // per tile) instead of adding as they finish, and the grid runs the KV heads fastest so that the CTAs sharing
  // a tile run in different waves; costs are in docs/measurements/kernels.md.
  bool deterministic = false;
};

bool backward_supported();  // built with the Hopper backward (sm_90a) and running on one
// dsum[b][h][row] = sum_d dout[b][row][h][d] * out[b][row][h][d] (out is the forward's fp32 output).
void attention_backward_prepare(const float* out, const void* dout, DType dtype, int B, int q_rows, int H, int D,
                                float* dsum, void* stream);
// The same from the output in dout's 16-bit type, as a training framework keeps it (tasp.torch): no fp32 copy of it
// first (a 32M-element copy took 175 us of a 0.6 ms gap to `tasp run` on an H200, 2026-11-26).
void attention_backward_prepare16(const void* out, const void* dout, DType dtype, int B, int q_rows, int H, int D,
                                  float* dsum, void* stream);
// Checks the batch (throws std::invalid_argument naming the field), uploads the work list and launches.
void attention_backward(const AttentionBackwardBatch& b, Workspace& ws, void* stream);
// Floats of the dQ scratch for the batch's items: B * H * dq_accum_tile_floats(D) per tile of
// dq_accum_tile_rows(D) rows of each item's rows.
size_t dq_accum_floats(const AttentionBackwardBatch& b);
int dq_accum_tile_rows(int D);
int dq_accum_tile_floats(int D);  // rows times D rounded up to 64 (80 and 96 are held padded)
// dq[b][row][h][:] += scale * (the scratch's value) over the items' rows; dq fp32 [B, q_rows, H, D]. `overwrite`:
// = instead of +=, so a dq that held anything needs no clearing first (rows no item covers keep what they held).
void attention_backward_finish(const AttentionBackwardBatch& b, float* dq, Workspace& ws, void* stream,
                               bool overwrite = false);
// dq[b][row][h][:] = scale * (the scratch's value) in the batch's 16-bit type over the items' rows (written, not added
// to: rows no item covers keep what they held); dq [B, q_rows, H, D]. A pass whose dQ leaves in 16 bits ends here
// instead of in an fp32 dq and a cast.
void attention_backward_finish16(const AttentionBackwardBatch& b, void* dq, Workspace& ws, void* stream);
// acc[i] += add[i] for n floats (received dK/dV accumulators into the rank's own).
void add_into(float* acc, const float* add, size_t n, void* stream);
// acc[i] += add[i] (or acc[i] = add[i] with `overwrite`) for n 16-bit `add` values of `dtype`: accumulators that
// travelled in bf16 (a plan's accumulator: bf16), added to or made the rank's own fp32 ones.
void add_half_into(float* acc, const void* add, DType dtype, size_t n, bool overwrite, void* stream);

// dst += add over `rows` rows of `width` 16-bit `dtype` values each (rows `dst_pitch` and `add_pitch` elements apart),
// each sum made in fp32 and rounded once: moved query rows' partial dQ added into a framework's 16-bit dQ rows.
void add_rows16(void* dst, size_t dst_pitch, const void* add, size_t add_pitch, DType dtype, size_t width, size_t rows,
                void* stream);

// Folds a block's (out, lse) into the running (acc_out, acc_lse), rows x H of width D, in place.
void merge_out_lse(float* acc_out, float* acc_lse, const float* blk_out, const float* blk_lse, int B, int rows, int H,
                   int D, void* stream);
// Folds a partial (out, lse) of `len` query rows, out in `dtype` [B][len][H][D] and lse fp32 [B][H][len] (moved query
// rows come home so: planner/query_moves.hpp), into rows [row0, row0 + len) of the running acc_out fp32
// [B][acc_rows][H][D] and acc_lse [B][H][acc_rows], in place. Any D (a warp a row).
void merge_rows16(float* acc_out, float* acc_lse, int acc_rows, int row0, const void* blk_out, const float* blk_lse,
                  DType dtype, int B, int len, int H, int D, void* stream);
// out fp32 -> dst (bf16 or fp16), n elements.
void cast_out(const float* out, void* dst, DType dtype, size_t n, void* stream);
// What cast_out_rows adds to its fp32 rows before the cast: nothing, fp32 values or bf16 values.
enum class AddType { None, F32, BF16 };
// The same over `rows` rows of `width` elements, rows `src_pitch` and `dst_pitch` elements apart (one launch for a
// piece's accumulator rows of every batch, instead of one per row). With `add` (rows `src_pitch` apart too): dst =
// src + add, and src may be NULL (dst = add): the last sum into an accumulator fused with its cast, one pass over
// memory instead of two.
void cast_out_rows(const float* src, size_t src_pitch, void* dst, size_t dst_pitch, DType dtype, size_t width, size_t rows,
                   void* stream, const void* add = nullptr, AddType add_type = AddType::None);

// Uniform random values in [-1, 1) of the given type, from a counter hash (benchmarks, examples).
void fill_random(void* dst, DType dtype, size_t n, uint64_t seed, void* stream);

// Any visible CUDA device? (Tests skip without one.)
bool cuda_device_available();

}  // namespace tasp::kernels

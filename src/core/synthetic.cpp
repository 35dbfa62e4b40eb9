// Seeded synthetic indexer problems: realistic, structured and adversarial.
//
// Everything derives from splitmix64 hashes of (seed, stream, index), so a spec
// always produces the same bytes, independent of the standard library.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "check.h"
#include "flashindexer/host_problem.h"
#include "flashindexer/quantize.h"

namespace flashindexer {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A counter-based stream of uniforms and normals.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream, uint64_t index) : s_(splitmix(seed ^ splitmix(stream * 0x100000001B3ull ^ index))) {}
  uint64_t next() { return s_ = splitmix(s_); }
  double uniform() { return (next() >> 11) * 0x1.0p-53; }  // [0, 1)
  float normal() {                                           // Box-Muller
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  void normals(float* x, int n, float scale = 1.0f) {
    for (int i = 0; i < n; ++i) x[i] = scale * normal();
  }

 private:
  uint64_t s_;
};

enum Stream : uint64_t { kKeys = 1, kQueries, kWeights, kPages, kMisc, kContexts };

// Key of position s of request b: either a float vector to quantize, or raw bytes.
struct Key {
  float v[kHeadDim];
  bool raw = false;
  uint8_t values[kHeadDim];
  uint8_t scale4[4];
};

void set_fp8_scale(Key& k, float s) { std::memcpy(k.scale4, &s, 4); }

void make_key(const SyntheticSpec& spec, int32_t b, int64_t s, int64_t ctx, Key& key) {
  Rng rng(spec.seed, kKeys, (uint64_t(b) << 40) ^ uint64_t(s));
  Rng req(spec.seed, kMisc, uint64_t(b));  // per-request constants
  const bool fp8 = spec.format == CacheFormat::kFp8E4M3;
  key.raw = false;
  switch (spec.generator) {
    case Generator::kGaussian:
      rng.normals(key.v, kHeadDim);
      return;
    case Generator::kStructured: {
      float u[kHeadDim];
      req.normals(u, kHeadDim);
      rng.normals(key.v, kHeadDim);
      const bool hot = splitmix(spec.seed ^ (uint64_t(b) << 32) ^ uint64_t(s)) % 512 == 0;
      const float a = hot ? 3.0f : 0.6f * static_cast<float>(s) / static_cast<float>(std::max<int64_t>(ctx, 1));
      for (int d = 0; d < kHeadDim; ++d) key.v[d] += a * u[d];
      return;
    }
    case Generator::kPlateau:
      if (rng.uniform() < 0.75) {
        std::fill(key.v, key.v + kHeadDim, 0.0f);
      } else {
        rng.normals(key.v, kHeadDim);
      }
      return;
    case Generator::kTies: {
      Rng pick(spec.seed, kMisc, 1000 + rng.next() % 8);
      pick.normals(key.v, kHeadDim);
      return;
    }
    case Generator::kUlp: {
      Rng base(spec.seed, kMisc, 77);
      base.normals(key.v, kHeadDim);
      key.raw = true;
      if (fp8) {
        float scale = 1.0f;
        quantize_fp8(key.v, kHeadDim, key.values, &scale);
        uint32_t bits;
        std::memcpy(&bits, &scale, 4);
        bits += static_cast<uint32_t>(rng.next() % 4);  // scales 0..3 ulps apart
        std::memcpy(&scale, &bits, 4);
        set_fp8_scale(key, scale);
      } else {
        quantize_mxfp4(key.v, kHeadDim, key.values, key.scale4);
        key.scale4[3] = 127 - 28;  // block 3: tiny per-position perturbations
        for (int i = 48; i < 64; ++i) key.values[i] = static_cast<uint8_t>(rng.next());
      }
      return;
    }
    case Generator::kAscending:
    case Generator::kDescending: {
      // Every element equal to a level value that never decreases along s.
      const int64_t levels = 96;
      int64_t level = ctx > 0 ? s * levels / ctx : 0;
      if (spec.generator == Generator::kDescending) level = levels - 1 - level;
      key.raw = true;
      if (fp8) {
        std::fill(key.values, key.values + kHeadDim, uint8_t{0x38});  // 1.0
        set_fp8_scale(key, 1.0f + static_cast<float>(s) * (spec.generator == Generator::kAscending ? 0x1p-12f : -0x1p-30f) +
                               static_cast<float>(level));
      } else {
        const uint8_t code = (level & 1) ? 0x5 : 0x4;  // 3 or 2
        std::fill(key.values, key.values + 64, static_cast<uint8_t>(code | (code << 4)));
        std::fill(key.scale4, key.scale4 + 4, static_cast<uint8_t>(127 - 48 + level / 2));
      }
      return;
    }
    case Generator::kWideRange: {
      // Each 32-element block (one k32 step of an FP8 MMA): element 0 dominant (448 times
      // the token scale, positive for 3 positions in 4), the 31 others small and positive
      // (3.5 or 3.75). With the queries below, each block holds one product of 448^2 and 31
      // of at most 15, under 2^-13 of it: exact sums keep them, an accumulator that
      // aligns a block's products to the largest and keeps 13 fraction bits drops them
      // (2.3e-3 * M). The token scale varies, so do the scores.
      const float c = 0.5f + static_cast<float>(rng.uniform());
      const float sign = rng.next() % 4 == 0 ? -1.0f : 1.0f;
      for (int d = 0; d < kHeadDim; ++d)
        key.v[d] = c * (d % 32 == 0 ? sign * 448.0f : (rng.next() & 1 ? 3.75f : 3.5f));
      return;
    }
    case Generator::kSpecials: {
      const uint64_t h = rng.next();
      if (h % 8 == 0) {
        std::fill(key.v, key.v + kHeadDim, 0.0f);
      } else {
        rng.normals(key.v, kHeadDim);
      }
      if (h % 16 == 1) {  // a NaN key: NaN scale byte / NaN e4m3 code
        key.raw = true;
        if (fp8) {
          float scale = 1.0f;
          quantize_fp8(key.v, kHeadDim, key.values, &scale);
          key.values[5] = 0x7F;
          set_fp8_scale(key, scale);
        } else {
          quantize_mxfp4(key.v, kHeadDim, key.values, key.scale4);
          key.scale4[0] = 0xFF;
        }
      }
      return;
    }
  }
}

// Query heads [H, D] and weights [H] of row r (request b, index i within the request).
void make_query(const SyntheticSpec& spec, int64_t r, int32_t b, float* q, float* w) {
  const int H = spec.num_heads;
  Rng rng(spec.seed, kQueries, uint64_t(r));
  Rng wr(spec.seed, kWeights, uint64_t(r));
  const float wscale = 1.0f / std::sqrt(static_cast<float>(kHeadDim * H));
  rng.normals(q, H * kHeadDim);
  for (int h = 0; h < H; ++h) w[h] = wscale * wr.normal();
  switch (spec.generator) {
    case Generator::kStructured: {
      float u[kHeadDim], base[kHeadDim];
      Rng req(spec.seed, kMisc, uint64_t(b));
      req.normals(u, kHeadDim);
      Rng shared(spec.seed, kMisc, 5000 + uint64_t(b));
      shared.normals(base, kHeadDim);
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < kHeadDim; ++d)
          q[h * kHeadDim + d] = u[d] + 0.3f * base[d] + 0.1f * q[h * kHeadDim + d];
      for (int h = 0; h < H; ++h) w[h] = std::fabs(w[h]);
      return;
    }
    case Generator::kWideRange:  // see make_key: 448 at each block's element 0, 4 elsewhere
      for (int i = 0; i < H * kHeadDim; ++i) q[i] = i % 32 == 0 ? 448.0f : 4.0f;
      for (int h = 0; h < H; ++h) w[h] = std::fabs(w[h]);
      return;
    case Generator::kPlateau:
    case Generator::kAscending:
    case Generator::kDescending:
      for (int i = 0; i < H * kHeadDim; ++i) q[i] = std::fabs(q[i]);
      for (int h = 0; h < H; ++h) w[h] = std::fabs(w[h]);
      return;
    case Generator::kSpecials:
      switch (r % 6) {
        case 1: w[0] = kInf; break;
        case 2: w[1 % H] = -kInf; break;
        case 3: w[2 % H] = std::numeric_limits<float>::quiet_NaN(); break;
        case 4: std::fill(w, w + H, -0.0f); break;
        case 5: for (int h = 0; h < H; ++h) w[h] = (h & 1) ? -0.0f : 0.0f; break;
        default: break;
      }
      return;
    default:
      return;
  }
}

Status check_spec(const SyntheticSpec& s) {
  FI_CHECK_ARG(s.num_heads == 32 || s.num_heads == 64, kInvalidArgument, "spec.num_heads", "32 or 64", s.num_heads);
  FI_CHECK_ARG(s.page_size >= 1 && s.page_size <= 4096, kInvalidArgument, "spec.page_size", "1..4096", s.page_size);
  FI_CHECK_ARG(s.context >= 1 && s.context <= (int64_t{1} << 30), kInvalidArgument, "spec.context", "1..2^30",
               s.context);
  FI_CHECK_ARG(s.requests >= 1, kInvalidArgument, "spec.requests", ">= 1", s.requests);
  FI_CHECK_ARG(s.k >= 1, kInvalidArgument, "spec.k", ">= 1", s.k);
  FI_CHECK_ARG(!s.contiguous || s.requests == 1, kInvalidArgument, "spec.requests", "1 for a contiguous cache",
               s.requests);
  if (s.form == RowForm::kRagged) {
    FI_CHECK_ARG(s.rows >= s.requests, kInvalidArgument, "spec.rows", ">= requests", s.rows);
  } else {
    FI_CHECK_ARG(s.next_n >= 1 && s.next_n <= 4, kInvalidArgument, "spec.next_n", "1..4", s.next_n);
  }
  const int64_t payload = page_payload_bytes(s.format, s.page_size);
  FI_CHECK_ARG(s.page_stride == 0 || (s.page_stride >= payload && s.page_stride % 16 == 0), kInvalidArgument,
               "spec.page_stride", "0 or a multiple of 16 >= " + std::to_string(payload), s.page_stride);
  return Status::ok();
}

}  // namespace

const char* to_string(Generator g) {
  switch (g) {
    case Generator::kGaussian: return "gaussian";
    case Generator::kStructured: return "structured";
    case Generator::kPlateau: return "plateau";
    case Generator::kTies: return "ties";
    case Generator::kUlp: return "ulp";
    case Generator::kAscending: return "ascending";
    case Generator::kDescending: return "descending";
    case Generator::kSpecials: return "specials";
    case Generator::kWideRange: return "wide_range";
  }
  return "unknown";
}

bool parse_generator(const std::string& name, Generator* out) {
  for (Generator g : kAllGenerators)
    if (name == to_string(g)) {
      *out = g;
      return true;
    }
  return false;
}

bool apply_preset(const std::string& name, SyntheticSpec* s) {
  struct Preset {
    const char* name;
    CacheFormat format;
    int32_t heads, k, page;
  };
  static constexpr Preset kPresets[] = {
      {"v4-flash", CacheFormat::kMxfp4, 64, 512, 64},
      {"v4-pro", CacheFormat::kMxfp4, 64, 1024, 64},
      {"v32", CacheFormat::kFp8E4M3, 64, 2048, 64},
      {"glm5", CacheFormat::kFp8E4M3, 32, 2048, 64},
  };
  for (const Preset& p : kPresets)
    if (name == p.name) {
      s->format = p.format;
      s->num_heads = p.heads;
      s->k = p.k;
      s->page_size = p.page;
      return true;
    }
  return false;
}

Status make_synthetic(const SyntheticSpec& spec, HostProblem* out) {
  FI_RETURN_IF_ERROR(check_spec(spec));
  HostProblem p;
  p.format = spec.format;
  p.num_heads = spec.num_heads;
  p.page_size = spec.page_size;
  const int64_t payload = page_payload_bytes(spec.format, spec.page_size);
  p.page_stride = spec.page_stride ? spec.page_stride : (payload + 15) / 16 * 16;
  p.k = spec.k;
  p.order = spec.order;
  p.accuracy = spec.accuracy;
  p.weight_type = spec.weight_type;
  p.form = spec.form;
  p.num_requests = spec.requests;
  p.next_n = spec.form == RowForm::kDecode ? spec.next_n : 1;
  p.max_context = spec.context;

  // Rows and the number of positions each request holds.
  std::vector<int64_t> held(size_t(spec.requests), spec.context);
  std::vector<int32_t> row_request;
  if (spec.form == RowForm::kRagged) {
    p.num_rows = spec.rows;
    for (int32_t b = 0; b < spec.requests; ++b) {
      const int64_t first = spec.rows * b / spec.requests, last = spec.rows * (b + 1) / spec.requests;
      const int64_t n = last - first;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t raw = 4 * spec.context - n + i;
        const int64_t end = std::clamp<int64_t>((raw + 1) / 4, 1, spec.context);
        const int64_t start = spec.sliding_window > 0 ? std::max<int64_t>(0, end - spec.sliding_window) : 0;
        p.row_batch.push_back(b);
        p.window_start.push_back(static_cast<int32_t>(start));
        p.window_end.push_back(static_cast<int32_t>(end));
        row_request.push_back(b);
      }
    }
  } else {
    Rng rng(spec.seed, kContexts, 0);
    for (int32_t b = 0; b < spec.requests; ++b) {
      const int64_t len = b == 0 ? spec.context : spec.context / 2 + int64_t(rng.next() % uint64_t(spec.context / 2 + 1));
      held[size_t(b)] = std::min(len, spec.context);
      p.context_lens.push_back(static_cast<int32_t>(held[size_t(b)]));
      for (int n = 0; n < spec.next_n; ++n) row_request.push_back(b);
    }
  }

  // Pages: each request gets its own pages, in a shuffled physical order; the
  // table entries past a request's pages are -1 (never read by a valid window).
  const int64_t ps = spec.page_size;
  p.table_width = spec.contiguous ? 0 : (spec.context + ps - 1) / ps;
  int64_t used = 0;
  for (int64_t h : held) used += (h + ps - 1) / ps;
  p.num_pages = spec.contiguous ? used : used + 3;
  std::vector<int32_t> order(size_t(p.num_pages));
  std::iota(order.begin(), order.end(), 0);
  if (spec.shuffle_pages && !spec.contiguous) {
    Rng rng(spec.seed, kPages, 0);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next() % i]);
  }
  if (!spec.contiguous) {
    p.page_table.assign(size_t(spec.requests) * size_t(p.table_width), -1);
    size_t next = 0;
    for (int32_t b = 0; b < spec.requests; ++b)
      for (int64_t i = 0; i < (held[size_t(b)] + ps - 1) / ps; ++i)
        p.page_table[size_t(b) * size_t(p.table_width) + size_t(i)] = order[next++];
  }
  FI_CHECK_ARG(p.num_pages <= INT64_MAX / p.page_stride, kOverflow, "pool bytes", "to fit in int64", p.num_pages);
  p.pool.assign(size_t(p.num_pages * p.page_stride), 0);

  const IndexerProblem view = p.view();
  Key key;
  for (int32_t b = 0; b < spec.requests; ++b) {
    for (int64_t s = 0; s < held[size_t(b)]; ++s) {
      make_key(spec, b, s, spec.context, key);
      const PageToken pt = locate(view.cache.pages, b, s);
      if (key.raw) {
        store_key_bytes(view.cache, p.pool.data(), pt.page, pt.token, key.values, key.scale4);
      } else {
        store_key(view.cache, p.pool.data(), pt.page, pt.token, key.v);
      }
    }
  }

  // Queries and weights (fp8: the per-head q scale folded into the weight).
  const int64_t rows = p.rows();
  const int H = spec.num_heads;
  const int64_t hb = spec.format == CacheFormat::kMxfp4 ? kHeadDim / 2 : kHeadDim;
  p.q.assign(size_t(rows * H * hb), 0);
  if (spec.format == CacheFormat::kMxfp4) p.q_scale.assign(size_t(rows * H * (kHeadDim / 32)), 0);
  p.weights.assign(size_t(rows * H) * (spec.weight_type == WeightType::kF32 ? 4 : 2), 0);
  std::vector<float> q(size_t(H) * kHeadDim);
  std::vector<float> w(static_cast<size_t>(H));
  for (int64_t r = 0; r < rows; ++r) {
    make_query(spec, r, row_request[size_t(r)], q.data(), w.data());
    for (int h = 0; h < H; ++h) {
      uint8_t* scales = spec.format == CacheFormat::kMxfp4 ? &p.q_scale[size_t((r * H + h) * (kHeadDim / 32))] : nullptr;
      const float qs = quantize_query_head(spec.format, &q[size_t(h) * kHeadDim], &p.q[size_t((r * H + h) * hb)], scales);
      const float wf = w[size_t(h)] * qs;
      if (spec.weight_type == WeightType::kF32) {
        std::memcpy(&p.weights[size_t(r * H + h) * 4], &wf, 4);
      } else {
        const uint16_t wb = float_to_bf16(wf);
        std::memcpy(&p.weights[size_t(r * H + h) * 2], &wb, 2);
      }
    }
  }
  *out = std::move(p);
  return Status::ok();
}

}  // namespace flashindexer
